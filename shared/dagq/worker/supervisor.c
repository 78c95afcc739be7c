/* The per-task supervisor, compiled: supervisor.py in C, for its start-up cost (about
 * 1 ms where the interpreter takes about 20).
 *
 *   dagq-supervisor WORKER_PID [--unset NAME | --set NAME=VALUE]... -- ARGV...
 *
 * Same command line, exit codes and behaviour as dagq/worker/supervisor.py (whose
 * docstring is the reference): a child subreaper with a SIGTERM parent-death signal
 * (confirmed by getppid(), also every SAFETY_POLL_S seconds), which starts ARGV in a
 * child with a SIGKILL parent-death signal, a session of its own, default SIGPIPE and
 * SIGXFSZ and an empty signal mask; exits as that child did; on the worker's SIGTERM
 * (a stop) waits for the whole tree; on the worker's death SIGKILLs every descendant,
 * until none is left, and exits 125. --unset / --set are applied (C has no locale
 * coercion to undo, so parentdeath.wrap passes none). It first closes every descriptor
 * above stderr it inherited. POSIX and Linux prctl, libc only.
 *
 *   dagq-supervisor --serve WORKER_PID
 *
 * The spawn server (dagq/worker/spawner.py): one per worker process, for the worker's
 * life, starting every task of that worker in place of one supervisor per task. The
 * worker's stream socket on descriptor 3 brings it one connection per worker thread,
 * on which that thread asks for tasks and reads their replies (see spawner.py and the
 * frames below); it is a child subreaper with a SIGTERM parent-death signal, like the
 * per-task supervisor, and it also reads the worker's death as the end of that socket
 * (the kernel closes it when the worker dies, whichever thread started the server). A
 * task is one vfork and one execve: a session of its own, stdin /dev/null, stdout and
 * stderr the log descriptor sent with the request, its directory, exactly the
 * environment sent, an empty signal mask and a SIGKILL parent-death signal. The server
 * reports the task's pid, then its wait status; descendants orphaned by a task are
 * re-parented to the server and reaped. On the worker's death it SIGKILLs every
 * descendant, until none is left, and exits 125.
 *
 * Build: cc -O2 -Wall -Wextra -Werror -o .venv/bin/dagq-supervisor supervisor.c */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2         /* the command line is not as USAGE says */
#define EXIT_PARENT_GONE 125 /* the worker died: the tree was killed */
#define EXIT_CANNOT_RUN 127  /* ARGV could not be executed */
#define SAFETY_POLL_S 5      /* how often the parent is also checked without a signal */

static const char USAGE[] =
    "usage: dagq-supervisor WORKER_PID [--unset NAME | --set NAME=VALUE]... -- ARGV...\n"
    "       dagq-supervisor --serve WORKER_PID   (the worker's socket on descriptor 3)\n";

extern char **environ;
static struct sigaction saved_chld, saved_term; /* as inherited, for the task */

struct proc { pid_t pid, ppid; int marked; };

static int by_pid(const void *a, const void *b) {
    pid_t x = ((const struct proc *)a)->pid, y = ((const struct proc *)b)->pid;
    return (x > y) - (x < y);
}

/* Live (not zombie) processes of /proc with their parents, sorted by pid; their count
 * in *n (0 and NULL if /proc cannot be read). */
static struct proc *read_procs(size_t *n) {
    struct proc *all = NULL;
    size_t cap = 0;
    *n = 0;
    DIR *dir = opendir("/proc");
    if (!dir) return NULL;
    struct dirent *e;
    while ((e = readdir(dir))) {
        char *end, path[64], buf[1024];
        long pid = strtol(e->d_name, &end, 10);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || pid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "re");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        char *close = strrchr(buf, ')'), state;
        long ppid;
        if (!close || sscanf(close + 1, " %c %ld", &state, &ppid) != 2 || state == 'Z')
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            struct proc *more = realloc(all, cap * sizeof *all);
            if (!more) break;
            all = more;
        }
        all[(*n)++] = (struct proc){(pid_t)pid, (pid_t)ppid, 0};
    }
    closedir(dir);
    if (all) qsort(all, *n, sizeof *all, by_pid);
    return all;
}

/* SIGKILL every live descendant of this process (through /proc parent links). */
static void kill_descendants(void) {
    size_t n;
    struct proc *all = read_procs(&n), key = {0, 0, 0};
    pid_t me = getpid();
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (all[i].marked) continue;
            key.pid = all[i].ppid;
            struct proc *up = all[i].ppid == me ? NULL
                              : bsearch(&key, all, n, sizeof *all, by_pid);
            if (all[i].ppid == me || (up && up->marked)) {
                all[i].marked = changed = 1;
                kill(all[i].pid, SIGKILL);
            }
        }
    }
    free(all);
}

/* The worker is gone: SIGKILL every descendant (again, until none is left), reap them
 * all, exit. */
static void parent_gone(void) {
    for (;;) {
        kill_descendants();
        if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD) break;
        pid_t pid;
        while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {}
        if (pid < 0 && errno == ECHILD) break;
    }
    _exit(EXIT_PARENT_GONE);
}

/* End this process as the task's first process ended (wait status `status`). */
static void exit_like(int status) {
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        sigset_t one;
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core file of the supervisor */
        signal(sig, SIG_DFL);
        kill(getpid(), sig);
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/* The file to execute for `name`: itself if it has a '/', else the first executable
 * regular file named so in the task's PATH (the supervisor's default without one);
 * NULL with *err set if there is none. */
static char *resolve(const char *name, char **envp, int *err) {
    if (strchr(name, '/')) return strdup(name);
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (char **e = envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0) { path = *e + 5; break; }
    size_t len = strlen(name);
    *err = ENOENT;
    for (const char *p = path;; p++) {
        const char *colon = strchrnul(p, ':');
        size_t dlen = colon > p ? (size_t)(colon - p) : 1;
        char *full = malloc(dlen + len + 2);
        if (!full) { *err = ENOMEM; return NULL; }
        memcpy(full, colon > p ? p : ".", dlen);
        full[dlen] = '/';
        memcpy(full + dlen + 1, name, len + 1);
        struct stat st;
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(full, X_OK) == 0) return full;
            *err = EACCES;
        }
        free(full);
        p = colon;
        if (!*p) return NULL;
    }
}

/* Execute argv with default signal handling and an empty mask (the file `resolve`
 * finds: no shell fallback); exit 127 if it cannot be executed. */
static void run_in_place(char **argv) {
    sigset_t none;
    int error = 0;
    signal(SIGPIPE, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    sigaction(SIGCHLD, &saved_chld, NULL);
    sigaction(SIGTERM, &saved_term, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    char *path = resolve(argv[0], environ, &error);
    if (path) {
        execv(path, argv);
        error = errno;
    }
    dprintf(2, "dagq: cannot run '%s': %s\n", argv[0], strerror(error));
    _exit(EXIT_CANNOT_RUN);
}

/* Start argv in a child that dies with this process; its pid. With a path to execute
 * (no PATH search, which allocates) the child is a vfork: it only makes system calls
 * until it executes argv, and sparing the copy of this process's page tables saves
 * about 0.1 ms of the task's start. */
static pid_t spawn(char **argv) {
    pid_t me = getpid(), pid = strchr(argv[0], '/') ? vfork() : fork();
    if (pid != 0) return pid; /* < 0: reads as an exit of 127, below */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != me) _exit(EXIT_PARENT_GONE);
    setsid();
    run_in_place(argv);
    return 0; /* not reached */
}

/* Run argv under supervision for the worker `parent`; never returns. */
static void supervise(pid_t parent, char **argv) {
    sigset_t all, waited, term;
    siginfo_t info;
    struct sigaction dfl;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL; /* an ignored SIGCHLD or SIGTERM would be discarded */
    sigaction(SIGCHLD, &dfl, &saved_chld);
    sigaction(SIGTERM, &dfl, &saved_term);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0
        || prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0)
        run_in_place(argv); /* cannot supervise: run unsupervised */
    if (getppid() != parent) parent_gone(); /* died before PR_SET_PDEATHSIG was set */
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    struct timespec zero = {0, 0}, poll = {SAFETY_POLL_S, 0};
    if (sigtimedwait(&term, &info, &zero) == SIGTERM && info.si_pid == parent)
        exit_like(SIGTERM); /* stopped before it started: "killed by SIGTERM" */
    pid_t child = spawn(argv);
    if (child < 0) {
        dprintf(2, "dagq: cannot run '%s': fork: %s\n", argv[0], strerror(errno));
        _exit(EXIT_CANNOT_RUN);
    }
    sigemptyset(&waited);
    sigaddset(&waited, SIGCHLD);
    sigaddset(&waited, SIGTERM);
    int status = 0, ended = 0, stopping = 0;
    for (;;) {
        int sig = sigtimedwait(&waited, &info, &poll);
        if (getppid() != parent) parent_gone();
        if (sig == SIGTERM && info.si_pid == parent) stopping = 1;
        int left = 1, st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) != 0) {
            if (pid < 0) {
                if (errno == EINTR) continue;
                left = 0; /* ECHILD: no child left */
                break;
            }
            if (pid == child) { status = st; ended = 1; }
        }
        if (ended && !(stopping && left)) exit_like(status);
    }
}

/* Close every descriptor from `first` up: the worker starts this with posix_spawn, which
 * passes on whatever the worker holds without close-on-exec. */
static void close_inherited(unsigned first) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, first, ~0U, 0U) == 0) return;
#endif
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = first; fd < (max > 0 ? max : 1024); fd++) close((int)fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(dir))) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || fd < (long)first || fd == dirfd(dir)) continue;
        close((int)fd);
    }
    closedir(dir);
}

/* ---- the spawn server (--serve) ------------------------------------------------------ */

#define SOCK_FD 3                 /* the worker's socket */
#define START_MAGIC 0x31535144u   /* "DQS1", little-endian: start a task */
#define CONNECT_MAGIC 0x31435144u /* "DQC1": a connection for one worker thread */
#define MAX_BODY (256u << 20)     /* more than any argv and environment execve takes */
#define MAX_CONNS 4096

enum { REPLY_STARTED = 1, REPLY_EXITED = 2, REPLY_FAILED = 3 };

/* A request: this head with a descriptor attached (SCM_RIGHTS). On the worker's socket
 * only CONNECT, with a socket of one worker thread's own; on such a connection START,
 * with the task's log, then `body` bytes: the directory ("" for none), `argc` arguments
 * and `envc` NAME=VALUE strings, each ending with a NUL. */
struct request_head { uint32_t magic, id, argc, envc, body; };
/* A reply, on the connection that asked: STARTED (pid), FAILED (value: errno of fork)
 * or EXITED (value: wait status). */
struct reply { uint32_t id; int32_t kind, pid, value; };
struct task { pid_t pid; uint32_t id; int conn; };

static struct task *tasks;
static size_t n_tasks, cap_tasks;
static struct pollfd polled[MAX_CONNS + 2]; /* the signalfd, the worker's socket, conns */
static nfds_t n_polled;
static int devnull_fd = -1;
static volatile int child_errno, child_in_chdir; /* written by a vfork child */

static void malformed(int fd) {
    dprintf(2, "dagq-supervisor: a malformed request from worker %d on descriptor %d\n",
            (int)getppid(), fd);
}

/* Close a thread's connection: tasks started through it are not reported any more. */
static void drop_conn(nfds_t at) {
    int fd = polled[at].fd;
    close(fd);
    polled[at] = polled[--n_polled];
    for (size_t i = 0; i < n_tasks; i++)
        if (tasks[i].conn == fd) tasks[i].conn = -1;
}

static void reply(int conn, uint32_t id, int kind, pid_t pid, int value) {
    struct reply r = {id, kind, pid, value};
    const char *at = (const char *)&r;
    size_t left = sizeof r;
    while (conn >= 0 && left) {
        ssize_t n = send(conn, at, left, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return; /* its thread is gone; the poll sees the end and drops it */
        at += n;
        left -= (size_t)n;
    }
}

static int read_full(int fd, char *buf, size_t len) {
    while (len) {
        ssize_t n = read(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Read a request's head from `sock` and the descriptor sent with it (-1 if none); -1 at
 * the end of the stream. */
static int read_head(int sock, struct request_head *h, int *fd) {
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    struct iovec iov = {h, sizeof *h};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.buf;
    m.msg_controllen = sizeof control.buf;
    *fd = -1;
    ssize_t n;
    do n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
    if (n <= 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(fd, CMSG_DATA(c), sizeof(int));
    if ((size_t)n < sizeof *h && read_full(sock, (char *)h + n, sizeof *h - (size_t)n) < 0)
        return -1;
    return 0;
}

/* The task's child: a vfork, which only makes system calls until it executes `path`
 * (NULL: it cannot, for the reason `err`); failures are left in child_errno. */
static pid_t vfork_task(const char *path, int err, int log, const char *cwd, char **argv,
                        char **envp) {
    pid_t me = getpid();
    sigset_t none;
    sigemptyset(&none);
    child_errno = path ? 0 : err;
    child_in_chdir = 0;
    pid_t pid = vfork();
    if (pid != 0) return pid;
    setsid();
    if (*cwd && chdir(cwd) != 0) {
        child_errno = errno;
        child_in_chdir = 1;
        _exit(EXIT_CANNOT_RUN);
    }
    dup2(devnull_fd, 0);
    dup2(log, 1);
    dup2(log, 2);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != me) _exit(EXIT_PARENT_GONE);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (path) {
        execve(path, argv, envp);
        child_errno = errno;
    }
    _exit(EXIT_CANNOT_RUN);
}

/* Start one task (see the header) and reply on `conn`; `log` is closed. */
static void start_task(int conn, uint32_t id, int log, char *cwd, char **argv, char **envp) {
    int err = 0;
    char *path = resolve(argv[0], envp, &err);
    pid_t pid = vfork_task(path, err, log, cwd, argv, envp);
    int fork_errno = errno;
    if (pid > 0 && child_errno)
        dprintf(log, child_in_chdir ? "dagq: cannot change to directory '%s': %s\n"
                                    : "dagq: cannot run '%s': %s\n",
                child_in_chdir ? cwd : argv[0], strerror(child_errno));
    free(path);
    if (log != devnull_fd) close(log);
    if (pid < 0) {
        reply(conn, id, REPLY_FAILED, 0, fork_errno);
        return;
    }
    if (n_tasks == cap_tasks) {
        size_t cap = cap_tasks ? 2 * cap_tasks : 64;
        struct task *more = realloc(tasks, cap * sizeof *tasks);
        if (!more) { kill(pid, SIGKILL); reply(conn, id, REPLY_FAILED, 0, ENOMEM); return; }
        tasks = more;
        cap_tasks = cap;
    }
    tasks[n_tasks++] = (struct task){pid, id, conn};
    reply(conn, id, REPLY_STARTED, pid, 0);
}

/* Take a new thread's connection from the worker's socket; its end means the worker is
 * gone, and so does a request the stream cannot go on after. */
static void handle_connect(void) {
    struct request_head h;
    int conn;
    if (read_head(SOCK_FD, &h, &conn) < 0) parent_gone();
    if (h.magic != CONNECT_MAGIC || conn < 0) {
        malformed(SOCK_FD);
        parent_gone();
    }
    if (n_polled == sizeof polled / sizeof *polled) {
        close(conn); /* its thread reads the end of the stream at once */
        return;
    }
    polled[n_polled++] = (struct pollfd){conn, POLLIN, 0};
}

/* Read and carry out one request of the connection polled at `at`; its end, or a
 * request it cannot read, closes it. */
static void handle_start(nfds_t at) {
    int conn = polled[at].fd, log;
    struct request_head h;
    if (read_head(conn, &h, &log) < 0) { drop_conn(at); return; }
    char *body = NULL, **argv = NULL, **envp = NULL;
    int ok = h.magic == START_MAGIC && h.argc > 0 && h.body <= MAX_BODY
             && h.argc <= h.body && h.envc <= h.body;
    if (ok) {
        body = malloc((size_t)h.body + 1);
        argv = calloc((size_t)h.argc + 1, sizeof *argv);
        envp = calloc((size_t)h.envc + 1, sizeof *envp);
        ok = body && argv && envp && read_full(conn, body, h.body) == 0;
    }
    if (ok) {
        size_t want = 1 + (size_t)h.argc + h.envc, got = 0;
        for (uint32_t i = 0; i < h.body; i++) got += body[i] == '\0';
        ok = got == want && h.body && body[h.body - 1] == '\0';
    }
    if (ok) {
        char *p = body, *cwd = p;
        p += strlen(p) + 1;
        for (uint32_t i = 0; i < h.argc; i++, p += strlen(p) + 1) argv[i] = p;
        for (uint32_t i = 0; i < h.envc; i++, p += strlen(p) + 1) envp[i] = p;
        start_task(conn, h.id, log < 0 ? devnull_fd : log, cwd, argv, envp);
    } else {
        malformed(conn);
        if (log >= 0) close(log);
        drop_conn(at);
    }
    free(body);
    free(argv);
    free(envp);
}

/* Reap every exited child; report those that are tasks. */
static void reap(void) {
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (size_t i = 0; i < n_tasks; i++) {
            if (tasks[i].pid != pid) continue;
            struct task t = tasks[i];
            tasks[i] = tasks[--n_tasks];
            reply(t.conn, t.id, REPLY_EXITED, pid, st);
            break;
        }
    }
}

/* Serve the worker `parent` until it is gone; never returns. */
static void serve(pid_t parent) {
    sigset_t all, waited;
    struct sigaction dfl;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL; /* an ignored SIGCHLD would reap tasks before we see them */
    int defaults[] = {SIGCHLD, SIGTERM, SIGPIPE, SIGXFSZ, SIGINT, SIGQUIT, SIGHUP};
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++)
        sigaction(defaults[i], &dfl, NULL);
    fcntl(SOCK_FD, F_SETFD, FD_CLOEXEC);
    devnull_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull_fd < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0
        || prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0) {
        dprintf(2, "dagq-supervisor: cannot serve: %s\n", strerror(errno));
        _exit(EXIT_CANNOT_RUN);
    }
    if (getppid() != parent) parent_gone(); /* died before PR_SET_PDEATHSIG was set */
    sigemptyset(&waited);
    sigaddset(&waited, SIGCHLD);
    sigaddset(&waited, SIGTERM);
    int sfd = signalfd(-1, &waited, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        dprintf(2, "dagq-supervisor: cannot serve: signalfd: %s\n", strerror(errno));
        _exit(EXIT_CANNOT_RUN);
    }
    polled[0] = (struct pollfd){sfd, POLLIN, 0};
    polled[1] = (struct pollfd){SOCK_FD, POLLIN, 0};
    n_polled = 2;
    for (;;) {
        int n = poll(polled, n_polled, SAFETY_POLL_S * 1000);
        /* a parent-death SIGTERM also comes when only the thread that started this
         * ends; getppid() tells the two apart */
        if (getppid() != parent) parent_gone();
        if (n <= 0) continue;
        if (polled[0].revents) {
            struct signalfd_siginfo info;
            while (read(sfd, &info, sizeof info) == (ssize_t)sizeof info) {}
            reap();
        }
        for (nfds_t i = n_polled; i-- > 2;)  /* from the end: drop_conn moves the last */
            if (polled[i].revents) handle_start(i);
        if (polled[1].revents) handle_connect();
    }
}

static int usage(void) {
    if (write(2, USAGE, sizeof USAGE - 1) < 0) {}
    return EXIT_USAGE;
}

static pid_t parse_pid(const char *text) {
    long long parent = 0;
    for (const char *c = text; *c; c++) {
        if (*c < '0' || *c > '9') return 0;
        parent = parent > 100000000000LL ? parent : parent * 10 + (*c - '0');
    }
    /* a pid beyond pid_t never matches getppid(): the worker reads as gone */
    return parent > 0x7fffffff ? -1 : (pid_t)parent;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--serve") == 0) {
        close_inherited(SOCK_FD + 1);
        pid_t parent = parse_pid(argv[2]);
        if (parent == 0) return usage();
        serve(parent);
    }
    close_inherited(3);
    char **args = argv + 1;
    int n = argc - 1, sep = -1;
    for (int i = 0; i < n; i++)
        if (strcmp(args[i], "--") == 0) { sep = i; break; }
    if (sep < 1 || sep == n - 1 || sep % 2 == 0 || !args[0][0]) return usage();
    pid_t parent = parse_pid(args[0]);
    if (parent == 0) return usage();
    for (int i = 1; i < sep; i += 2) {
        const char *flag = args[i], *value = args[i + 1];
        if (strcmp(flag, "--unset") != 0 && !(strcmp(flag, "--set") == 0 && strchr(value, '=')))
            return usage();
    }
    for (int i = 1; i < sep; i += 2) {
        char *value = args[i + 1];
        if (strcmp(args[i], "--set") == 0) {
            char *eq = strchr(value, '=');
            *eq = '\0';
            setenv(value, eq + 1, 1);
            *eq = '=';
        } else {
            unsetenv(value);
        }
    }
    supervise(parent, args + sep + 1);
    return EXIT_CANNOT_RUN; /* not reached */
}
