"""What `import zae_limiter` loads: never urllib3's ssl module, which a gevent
monkey-patch (Locust) must see first, so a locustfile may import the library first."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_library_leaves_urllib3_ssl_unloaded() -> None:
    code = (
        "import sys, zae_limiter\n"
        "print(sorted(m for m in sys.modules if m.startswith('urllib3.util.ssl')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
