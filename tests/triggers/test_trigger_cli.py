"""``dagq trigger add|list|watch|remove`` through the real ``dagq`` executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.triggers.conftest import WORKFLOW_YAML

DAGQ = str(Path(sys.executable).with_name("dagq"))


def test_add_watch_once_and_restart(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DAGQ_")},
           "DAGQ_STORE": f"sqlite:{tmp_path / 'x.db'}"}

    def dagq(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([DAGQ, *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done

    (tmp_path / "pipeline.yaml").write_text(WORKFLOW_YAML)
    (tmp_path / "inbox").mkdir()
    dagq("trigger", "add", "inbox", "--prefix", "inbox/", "--file", "pipeline.yaml",
         "--param-name", "path")
    [row] = json.loads(dagq("trigger", "list", "--json").stdout)
    assert (row["source"], row["prefix"]) == ("files", f"{tmp_path}/inbox/")
    (tmp_path / "inbox" / "a.csv").write_text("1\n")
    out = dagq("trigger", "watch", "--once", "--settle", "0").stdout
    assert out.startswith("submitted trig-inbox-") and "already existed" not in out
    again = dagq("trigger", "watch", "--once", "--settle", "0").stdout  # a restart
    assert again.split()[1] == out.split()[1] and "already existed" in again
    listed = json.loads(dagq("list", "--json").stdout)
    assert [w["id"] for w in listed] == [out.split()[1]]
    dagq("trigger", "remove", "inbox")
    assert json.loads(dagq("trigger", "list", "--json").stdout) == []
