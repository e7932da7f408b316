"""The browser apps' tests need the `spaces-test` extra (gradio, playwright) and a chromium; `make test-browser`
installs them. `make test` runs without that extra, so without gradio these files are not even imported (each imports
the apps at module level): they are marked `browser`, which the default run deselects anyway. Under
`HF_JEPA_REQUIRE_BROWSER=1` (CI's browser stage) a missing gradio is an error instead of a silent omission."""

import importlib.util
import os

if importlib.util.find_spec("gradio") is None:
    if os.environ.get("HF_JEPA_REQUIRE_BROWSER") == "1":
        raise RuntimeError(
            "browser tests required (HF_JEPA_REQUIRE_BROWSER=1) but gradio is not installed: "
            "pip install -e '.[spaces-test]' (make test-browser does)"
        )
    collect_ignore_glob = ["test_*.py"]
