"""The loopback Hub server against the REAL huggingface_hub / transformers clients (no network)."""

import hashlib
import os
import subprocess
import sys
import urllib.request

import pytest
import torch
from huggingface_hub import (
    ModelCard,
    ModelCardData,
    constants,
    create_repo,
    hf_hub_download,
    snapshot_download,
    upload_file,
    upload_folder,
)
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError
from safetensors.torch import save_file
from transformers import BertConfig, BertModel

from hf_jepa.testing.hub_server import use_loopback_hub


def _sha256(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_patches_are_restored(hub, tmp_path):
    import huggingface_hub.hf_api
    import transformers.utils.hub

    endpoint = constants.ENDPOINT
    with use_loopback_hub(hub, cache_dir=tmp_path):
        assert constants.ENDPOINT == hub.url and not constants.HF_HUB_OFFLINE and constants.HF_HUB_DISABLE_XET
        assert huggingface_hub.hf_api.api.endpoint == hub.url
        assert transformers.utils.hub.hf_api().endpoint == hub.url  # its cached HfApi is rebuilt inside
    assert constants.ENDPOINT == endpoint and constants.HF_HUB_OFFLINE
    assert huggingface_hub.hf_api.api.endpoint == endpoint
    assert transformers.utils.hub._hf_api is None or transformers.utils.hub._hf_api.endpoint != hub.url
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ.get("HF_ENDPOINT") != hub.url


def test_upload_folder_lfs_and_downloads(hub, online, tmp_path):
    url = create_repo("org/files")
    assert url.repo_id == "org/files" and url.startswith(hub.url)
    assert create_repo("org/files", exist_ok=True).repo_id == "org/files"  # the 409 carries "url"

    folder = tmp_path / "upload"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("hello hub\n")
    (folder / "sub" / "data.json").write_text('{"a": 1}')
    save_file({"w": torch.arange(12, dtype=torch.float32).reshape(3, 4)}, str(folder / "model.safetensors"))
    before = len(hub.requests)
    upload_folder(repo_id="org/files", folder_path=str(folder), commit_message="add files")

    log = hub.requests[before:]
    assert any(m == "POST" and p.endswith(".git/info/lfs/objects/batch") for m, p in log)
    assert any(m == "PUT" and p.startswith("/_lfs/") for m, p in log)
    stored = hub.files("org/files")
    assert stored["model.safetensors"] == (folder / "model.safetensors").read_bytes()
    assert stored["sub/data.json"] == b'{"a": 1}'

    path = hf_hub_download("org/files", "model.safetensors")
    assert path.startswith(str(online))
    assert _sha256(path) == _sha256(folder / "model.safetensors")
    assert open(hf_hub_download("org/files", "sub/data.json")).read() == '{"a": 1}'
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("org/files", "missing.txt")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/nope", "config.json")

    snap = snapshot_download("org/files")
    for rel in ("notes.txt", "sub/data.json", "model.safetensors"):
        assert _sha256(os.path.join(snap, rel)) == _sha256(folder / rel)

    # re-uploading unchanged files is a no-op commit; the LFS object is not sent twice
    before = len(hub.requests)
    upload_folder(repo_id="org/files", folder_path=str(folder))
    assert not any(m == "PUT" for m, _ in hub.requests[before:])


def test_range_request(hub, online):
    create_repo("org/ranges", exist_ok=True)
    upload_file(path_or_fileobj=b"0123456789", path_in_repo="digits.txt", repo_id="org/ranges")
    request = urllib.request.Request(f"{hub.url}/org/ranges/resolve/main/digits.txt", headers={"Range": "bytes=3-"})
    with urllib.request.urlopen(request) as r:
        assert r.status == 206 and r.read() == b"3456789"
        assert r.headers["Content-Range"] == "bytes 3-9/10"


def test_push_to_hub_from_pretrained_bit_equal(hub, online):
    torch.manual_seed(0)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, vocab_size=99)
    model = BertModel(config).eval()
    model.push_to_hub("org/tiny-bert")
    assert {"config.json", "model.safetensors", "README.md"} <= set(hub.files("org/tiny-bert"))

    loaded = BertModel.from_pretrained("org/tiny-bert", cache_dir=str(online))
    ref, got = model.state_dict(), loaded.state_dict()
    assert ref.keys() == got.keys()
    for name in ref:
        assert torch.equal(ref[name], got[name]), name


def test_model_card_round_trip(hub, online):
    create_repo("org/card", exist_ok=True)
    data = ModelCardData(license="apache-2.0", tags=["jepa", "loopback"], library_name="transformers")
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n# Tiny card\n\nSome text.\n")
    card.push_to_hub("org/card")
    assert any(p == "/api/validate-yaml" for _, p in hub.requests)

    loaded = ModelCard.load("org/card")
    assert loaded.data.license == "apache-2.0"
    assert loaded.data.tags == ["jepa", "loopback"]
    assert loaded.text.strip().startswith("# Tiny card")
    assert hub.files("org/card")["README.md"].decode() == str(card)


def test_subprocess_client(hub, tmp_path):
    with use_loopback_hub(hub, cache_dir=tmp_path):
        create_repo("org/sub", exist_ok=True)
        upload_file(path_or_fileobj=b"from parent", path_in_repo="x.txt", repo_id="org/sub")
    code = "from huggingface_hub import hf_hub_download; print(open(hf_hub_download('org/sub', 'x.txt')).read())"
    env = {**os.environ, **hub.env(tmp_path / "sub-cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "from parent"
