"""cuptimon never imports torch; the hook is only installed when torch is
already imported."""

import subprocess
import sys

from test_inprocess import PRELUDE


def test_no_torch_no_hook(daemon):
    code = r'''
import sys
import cuptimon, cuptimon.torch_integration as ti
assert "torch" not in sys.modules, "importing cuptimon imported torch"
assert ti.install() is False
assert ti.installed() is False
assert ti.wrapped() == {"record_function": False, "nvtx": False}
ti.uninstall()  # harmless
assert "torch" not in sys.modules, "install() imported torch"
print("ok")
'''
    p = subprocess.run([sys.executable, "-c", code], env=daemon.env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_start_collection_without_torch(inproc):
    rc, out, err, r = inproc(PRELUDE + r'''
cuptimon.start_collection()
result(torch_imported="torch" in sys.modules,
       installed=cuptimon.torch_integration.installed())
cuptimon.stop_collection()
''')
    assert rc == 0, err
    assert r == {"torch_imported": False, "installed": False}
