"""Write uv.lock from pyproject.toml (the one list of pins), with torch from PyTorch's CPU index.

    python deploy/update_lock.py                       # = `uv lock`, where download.pytorch.org answers
    python deploy/update_lock.py --cpu-wheels /opt/wheels   # a machine that cannot reach it

Community Cloud installs uv.lock before any requirements.txt, so the hosted copy gets the CPU
build of PyTorch with no hand edit. Where download.pytorch.org cannot be reached, `--cpu-wheels`
serves the torch CPU wheels found in that folder on a loopback index that mirrors the CPU index's
layout (/whl/cpu/torch/ -> /whl/cpu/<wheel>), locks against it, and writes the lock with the real
index's addresses. The hashes are those of the local wheels: they must be copies of the wheels on
download.pytorch.org (the first install from the lock checks it; README "Deploy").
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
UV = shutil.which("uv") or "uv"


def mirror(wheels: list[Path], folder: Path) -> None:
    """A PEP 503 page for torch at folder/whl/cpu/torch/, linking to the wheels one level up."""
    cpu = folder / "whl" / "cpu"
    (cpu / "torch").mkdir(parents=True)
    links = []
    for wheel in wheels:
        shutil.copy(wheel, cpu / wheel.name)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        links.append(f'<a href="../{quote(wheel.name)}#sha256={digest}">{wheel.name}</a><br>')
    (cpu / "torch" / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")


def lock_offline(cpu_wheels: Path) -> None:
    wheels = sorted(cpu_wheels.glob("torch-*+cpu-*.whl"))
    if not wheels:
        raise SystemExit(f"no torch CPU wheel (torch-*+cpu-*.whl) in {cpu_wheels}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        mirror(wheels, work / "index")
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(work / "index"))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        local = f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
        try:
            project = work / "project"
            project.mkdir()
            (project / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text().replace(CPU_INDEX, local))
            if (ROOT / "uv.lock").exists():  # keep what is already locked; only re-resolve what changed
                (project / "uv.lock").write_text((ROOT / "uv.lock").read_text().replace(CPU_INDEX, local))
            subprocess.run([UV, "lock", "--no-cache"], cwd=project, check=True)
            (ROOT / "uv.lock").write_text((project / "uv.lock").read_text().replace(local, CPU_INDEX))
        finally:
            server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-wheels", type=Path, help="a folder holding torch's CPU wheels (offline locking)")
    args = parser.parse_args()
    if args.cpu_wheels:
        lock_offline(args.cpu_wheels)
    else:
        subprocess.run([UV, "lock"], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
