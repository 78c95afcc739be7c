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
 * Build: cc -O2 -Wall -Wextra -Werror -o .venv/bin/dagq-supervisor supervisor.c */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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
    "usage: dagq-supervisor WORKER_PID [--unset NAME | --set NAME=VALUE]... -- ARGV...\n";

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

/* Execute argv with default signal handling and an empty mask (searching PATH as
 * supervisor.py does: no shell fallback); exit 127 if it cannot be executed. */
static void run_in_place(char **argv) {
    sigset_t none;
    int error = ENOENT;
    signal(SIGPIPE, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    sigaction(SIGCHLD, &saved_chld, NULL);
    sigaction(SIGTERM, &saved_term, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (strchr(argv[0], '/')) {
        execv(argv[0], argv);
        error = errno;
    } else {
        const char *path = getenv("PATH");
        if (!path) path = "/usr/local/bin:/usr/bin:/bin";
        size_t len = strlen(argv[0]);
        for (const char *p = path;; p++) {
            const char *colon = strchrnul(p, ':');
            size_t dlen = colon > p ? (size_t)(colon - p) : 1;
            char *full = malloc(dlen + len + 2);
            if (full) {
                memcpy(full, colon > p ? p : ".", dlen);
                full[dlen] = '/';
                memcpy(full + dlen + 1, argv[0], len + 1);
                execv(full, argv);
                error = errno;
                free(full);
            }
            p = colon;
            if (!*p) break;
        }
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

/* Close every descriptor above stderr: the worker starts this with posix_spawn, which
 * passes on whatever the worker holds without close-on-exec. */
static void close_inherited(void) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
#endif
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < (max > 0 ? max : 1024); fd++) close((int)fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(dir))) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || fd < 3 || fd == dirfd(dir)) continue;
        close((int)fd);
    }
    closedir(dir);
}

static int usage(void) {
    if (write(2, USAGE, sizeof USAGE - 1) < 0) {}
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    close_inherited();
    char **args = argv + 1;
    int n = argc - 1, sep = -1;
    for (int i = 0; i < n; i++)
        if (strcmp(args[i], "--") == 0) { sep = i; break; }
    if (sep < 1 || sep == n - 1 || sep % 2 == 0 || !args[0][0]) return usage();
    long long parent = 0;
    for (const char *c = args[0]; *c; c++) {
        if (*c < '0' || *c > '9') return usage();
        parent = parent > 100000000000LL ? parent : parent * 10 + (*c - '0');
    }
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
    /* a pid beyond pid_t never matches getppid(): the worker reads as gone */
    supervise(parent > 0x7fffffff ? -1 : (pid_t)parent, args + sep + 1);
    return EXIT_CANNOT_RUN; /* not reached */
}
