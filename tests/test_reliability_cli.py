"""Every user error of `hf-jepa` is one line on stderr and exit status 2 (``--debug``: the traceback too); a bug keeps
its traceback (status 1); a push never changes the local folder. The cases are tabulated in docs/reliability.md."""

import hashlib
import json
import logging
import shutil
from pathlib import Path

import pytest

from hf_jepa.cards.common import MODEL_ID_PLACEHOLDER
from hf_jepa.cli import main
from hf_jepa.cli_errors import CliError
from hf_jepa.recipes.bro_jepa import BroJepaDataArguments
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments
from hf_jepa.recipes.i_jepa import IJepaDataArguments
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments
from hf_jepa.recipes.t_jepa import TJepaDataArguments
from hf_jepa.testing.hub_server import LoopbackHub, use_loopback_hub


@pytest.fixture(scope="module")
def bro_dir(tmp_path_factory):
    """A tiny BRo-JEPA model folder (2 steps on the embedded digits), trained once for the module."""
    out = tmp_path_factory.mktemp("bro-tiny")
    args = ["preset=tiny", "max_steps=2", "data=embedded", "per_device_batch_size=8", "prototype_images=200"]
    args += ["eval_images=50", "plot=false", "disable_progress_bar=true", "warmup_steps=0"]
    assert main(["train", "bro-jepa", "--set", *args, "--output-dir", str(out)]) == 0
    return out


@pytest.fixture
def copy_of(tmp_path):
    def copy(folder: Path) -> Path:
        target = tmp_path / f"copy-of-{folder.name}"
        shutil.copytree(folder, target)
        return target

    return copy


def user_error(capsys, argv) -> str:
    """Run `main(argv)`: it must exit 2 with exactly one line on stderr and no traceback; returns that line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hf-jepa: error: "), err
    return lines[0]


def debug_error(capsys, argv) -> str:
    """`main(["--debug", *argv])`: exit 2, the traceback, then the same one-line message last."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["--debug", *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.startswith("Traceback (most recent call last):"), err
    assert err.strip().splitlines()[-1].startswith("hf-jepa: error: "), err
    return err


def folder_hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# ------------------------------------------------------------------------------------------------ config files


def test_malformed_yaml_names_file_and_line(capsys, tmp_path):
    bad = tmp_path / "run.yaml"
    bad.write_text("preset: tiny\nmax_steps: [1\n  data: x\n")
    line = user_error(capsys, ["train", "bro-jepa", "--config", str(bad), "--output-dir", str(tmp_path / "out")])
    assert f"{bad}:3:7: invalid YAML" in line

    listing = tmp_path / "list.yaml"
    listing.write_text("- max_steps\n- 3\n")
    line = user_error(capsys, ["train", "bro-jepa", "--config", str(listing), "--output-dir", str(tmp_path / "out")])
    assert "must hold a mapping of settings" in line and str(listing) in line

    missing = tmp_path / "missing.yaml"
    line = user_error(capsys, ["train", "bro-jepa", "--config", str(missing), "--output-dir", str(tmp_path / "out")])
    assert f"--config {missing}: cannot read it (No such file or directory)" in line
    assert "Traceback" in debug_error(capsys, ["train", "bro-jepa", "--config", str(bad), "--output-dir", "x"])
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    "family, setting, expected",
    [
        ("bro-jepa", "latent_dimm=32", "unknown setting 'latent_dimm' (did you mean 'latent_dim'?); valid keys:"),
        ("bro-jepa", "model.max_shift=1", "unknown setting 'model.max_shift'"),
        ("bro-jepa", "max_steps=abc", "max_steps expects an integer, got 'abc'"),
        ("bro-jepa", "max_steps=1.5", "max_steps expects an integer, got 1.5"),
        ("bro-jepa", "max_steps=true", "max_steps expects an integer, got true"),
        ("bro-jepa", "learning_rate=fast", "learning_rate expects a number, got 'fast'"),
        ("bro-jepa", "preset=huge", "unknown preset 'huge'"),
        ("bro-jepa", "novalue", "--set expects key=value, got 'novalue'"),
        ("bro-jepa", "max_shift=-1", "max_shift must be an integer >= 0, got -1"),
        ("bro-jepa", "eval_images=-5", "eval_images must be an integer >= 1 (or 0 = all test images), got -5"),
        ("bro-jepa", "plot=3", "plot must be true or false, got 3 (int)"),
        ("bro-jepa", "data=7", "data must be a string or null, got 7 (int)"),
        ("i-jepa", "probe_images=0", "probe_images must be an integer >= 20, got 0"),
        ("t-jepa", "diagnostics_sentences=2", "diagnostics_sentences must be an integer >= 8, got 2"),
        ("t-jepa", "corpus=poems", "corpus must be one of 'text', 'ambiguity'; got 'poems'"),
        ("epm-jepa", "eval_every=-1", "eval_every must be an integer >= 0, got -1"),
        ("epm-jepa", "shift_gravity_min=.nan", "shift_gravity_min must be a finite number, got nan"),
        ("jepa-reasoner", "num_eval_examples=0", "num_eval_examples must be an integer >= 1, got 0"),
        ("jepa-reasoner", "max_operations=1", "max_operations must be an integer >= 2, got 1"),
        ("jepa-reasoner", "warmup_steps=-1", "warmup_steps must be >= 0"),
    ],
)
def test_bad_settings_are_one_line(capsys, tmp_path, family, setting, expected):
    line = user_error(capsys, ["train", family, "--set", setting, "--output-dir", str(tmp_path / "out")])
    assert expected in line
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_argument_errors_are_one_line(capsys, tmp_path):
    line = user_error(capsys, ["train", "bro-jepax", "--output-dir", str(tmp_path)])
    assert "argument FAMILY: invalid choice: 'bro-jepax'" in line and "'bro-jepa'" in line
    assert "(see 'hf-jepa train --help')" in line
    assert "--output-dir is required" in user_error(capsys, ["train", "bro-jepa", "--set", "max_steps=2"])


def test_overwrite_flag_sets_the_training_setting(monkeypatch, capsys, tmp_path):
    import hf_jepa.cli as cli

    seen = []

    def capture(family, settings):
        seen.append(dict(settings))
        raise CliError("stop here")

    monkeypatch.setattr(cli, "build_train_setup", capture)
    user_error(capsys, ["train", "bro-jepa", "--overwrite", "--output-dir", str(tmp_path)])
    user_error(capsys, ["train", "bro-jepa", "--output-dir", str(tmp_path)])
    assert seen[0]["overwrite_output_dir"] is True and "overwrite_output_dir" not in seen[1]


@pytest.mark.parametrize(
    "cls, kwargs, error, message",
    [
        (BroJepaDataArguments, dict(prototype_images=-1), ValueError, "prototype_images must be an integer >= 1"),
        (BroJepaDataArguments, dict(max_shift=1.5), TypeError, "max_shift must be an integer, got 1.5"),
        (BroJepaDataArguments, dict(eval_images=True), TypeError, "eval_images must be an integer, got True"),
        (IJepaDataArguments, dict(diagnostics_images=1), ValueError, "diagnostics_images must be an integer >= 2"),
        (TJepaDataArguments, dict(ambiguity=0), ValueError, "ambiguity must be an integer >= 1"),
        (TJepaDataArguments, dict(max_length=4), ValueError, "max_length must be an integer >= 8"),
        (EpmJepaDataArguments, dict(stage="adapted"), ValueError, "stage must be one of 'pretrain', 'adapt'"),
        (EpmJepaDataArguments, dict(num_digits=3), ValueError, "num_digits must be one of 1, 2"),
        (EpmJepaDataArguments, dict(sequence_length=1), ValueError, "sequence_length must be an integer >= 2"),
        (EpmJepaDataArguments, dict(train_gravity="low"), TypeError, "train_gravity must be a number"),
        (
            EpmJepaDataArguments,
            dict(shift_gravity_min=0.6),
            ValueError,
            r"shift_gravity_min \(0.6\) must be < shift_gravity_max \(0.5\): the shift gravity is drawn from",
        ),
        (JepaReasonerDataArguments, dict(task="chess"), ValueError, "task must be one of"),
        (JepaReasonerDataArguments, dict(num_nodes=40), ValueError, "node_vocab_size must be an integer >= 40"),
        (JepaReasonerDataArguments, dict(task_seed=-1), ValueError, "task_seed must be an integer >= 0"),
    ],
)
def test_data_arguments_validate_type_and_range(cls, kwargs, error, message):
    with pytest.raises(error, match=message):
        cls(**kwargs)


def test_data_arguments_accept_documented_values(tmp_path):
    assert BroJepaDataArguments(eval_images=0, prototype_images=0).eval_images == 0  # 0 = all
    assert EpmJepaDataArguments(train_gravity=0).train_gravity == 0.0 and isinstance(
        EpmJepaDataArguments(train_gravity=0).train_gravity, float
    )
    assert EpmJepaDataArguments(stage="adapt", init_from="org/base").init_from == "org/base"  # a Hub id
    assert JepaReasonerDataArguments(reasoner=tmp_path.name).reasoner == tmp_path.name  # shaped like a Hub id


# ------------------------------------------------------------------------------------------------ model folders


def test_talker_with_missing_or_foreign_reasoner(capsys, tmp_path, bro_dir):
    out = str(tmp_path / "out")
    line = user_error(capsys, ["train", "jepa-mono-talker", "--set", "reasoner=/missing", "--output-dir", out])
    assert "reasoner: folder '/missing' does not exist; give the output folder of `hf-jepa train jepa-reasoner`" in line
    line = user_error(capsys, ["train", "jepa-dual-talker", "--set", f"reasoner={bro_dir}", "--output-dir", out])
    assert f"reasoner: folder '{bro_dir}' holds a model of type 'bro_jepa'" in line and "'jepa_reasoner'" in line
    line = user_error(capsys, ["train", "jepa-mono-talker", "--set", f"reasoner={tmp_path}", "--output-dir", out])
    assert "has no config.json" in line


def test_epm_init_from_a_bro_folder(capsys, tmp_path, bro_dir):
    settings = ["stage=adapt", f"init_from={bro_dir}", "data=embedded"]
    line = user_error(capsys, ["train", "epm-jepa", "--set", *settings, "--output-dir", str(tmp_path / "out")])
    assert f"init_from: folder '{bro_dir}' holds a model of type 'bro_jepa', but one of type 'epm_jepa'" in line


def test_from_pretrained_names_both_model_types(bro_dir):
    from hf_jepa import EpmJepaModel, TJepaModel

    with pytest.raises(ValueError, match=r"holds a model of type 'bro_jepa', but TJepaModel loads 't_jepa' models"):
        TJepaModel.from_pretrained(bro_dir)
    with pytest.raises(ValueError, match=r"holds a model of type 'bro_jepa', but EpmJepaModel loads 'epm_jepa'"):
        EpmJepaModel.from_base(str(bro_dir), track="ei")


def test_eval_truncated_weights(capsys, bro_dir, copy_of):
    folder = copy_of(bro_dir)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    line = user_error(capsys, ["eval", str(folder), "--data", "embedded"])
    assert f"{weights}: the weights are truncated or corrupt" in line and "save the model again" in line
    err = debug_error(capsys, ["eval", str(folder), "--data", "embedded"])
    assert "SafetensorError" in err  # the chained cause is shown


def test_eval_folder_mismatches(capsys, tmp_path, bro_dir, copy_of):
    from hf_jepa import IJepaConfig

    line = user_error(capsys, ["eval", str(tmp_path / "nothing")])
    assert "does not exist; give a saved model folder" in line
    line = user_error(capsys, ["eval", str(tmp_path)])
    assert "is not a saved model folder (no config.json)" in line

    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert"}))
    line = user_error(capsys, ["eval", str(bert)])
    assert "holds a model of type 'bert', which hf-jepa eval does not know" in line and "bro_jepa (bro-jepa)" in line
    (bert / "config.json").write_text("{not json")
    assert "not a readable JSON config" in user_error(capsys, ["eval", str(bert)])

    mixed = copy_of(bro_dir)  # an I-JEPA config beside BRo-JEPA weights
    IJepaConfig.tiny().save_pretrained(mixed)
    line = user_error(capsys, ["eval", str(mixed), "--data", "embedded"])
    assert "IJepaModel.from_pretrained: the checkpoint does not match the config" in line


def test_eval_data_arguments(capsys, bro_dir):
    for value in ("-5", "-1"):
        line = user_error(capsys, ["eval", str(bro_dir), "--data", "embedded", "--set", f"eval_images={value}"])
        assert f"eval --set: eval_images must be an integer >= 1 (or 0 = all test images), got {value}" in line
    line = user_error(capsys, ["eval", str(bro_dir), "--set", "eval_image=5"])
    assert "eval --set eval_image: no such data setting (did you mean 'eval_images'?)" in line
    assert "eval_images expects an integer, got 2.5" in user_error(
        capsys, ["eval", str(bro_dir), "--set", "eval_images=2.5"]
    )

    capsys.readouterr()
    assert main(["eval", str(bro_dir), "--data", "embedded", "--set", "eval_images=0", "--json"]) == 0  # 0 = all
    assert json.loads(capsys.readouterr().out)["eval_images"] > 50


# ------------------------------------------------------------------------------------------------ reproduce


def test_reproduce_variant_typo_lists_the_variants(capsys, tmp_path):
    from hf_jepa.reproductions.bro_jepa import VARIANTS

    argv = ["reproduce", "bro-jepa", "--quick", "--data", "embedded", "--output-dir", str(tmp_path / "out")]
    line = user_error(capsys, [*argv, "--variant", "Supervised MPL"])
    assert (
        "--variant 'Supervised MPL': no such row in the bro-jepa reproduction (did you mean 'Supervised MLP'?)" in line
    )
    assert all(repr(name) in line for name in VARIANTS)
    line = user_error(capsys, ["reproduce", "t-jepa", "--quick", "--variant", "x"])
    assert "the t-jepa reproduction has no variants" in line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------ internal errors


def test_a_bug_keeps_its_traceback(monkeypatch, capsys, tmp_path):
    import hf_jepa.cli as cli

    def broken(family, settings):
        return int("not a number")  # a ValueError from a Python operation, not a message: a bug

    monkeypatch.setattr(cli, "build_train_setup", broken)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "bro-jepa", "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert "Traceback (most recent call last)" in err and 'int("not a number")' in err
    assert err.strip().splitlines()[-1].startswith("hf-jepa: internal error: ValueError: invalid literal")


# ------------------------------------------------------------------------------------------------ push


@pytest.fixture
def no_progress_bars():
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()  # the upload bars are the client's UI, not part of the error report checked here
    yield
    if not was_disabled:
        enable_progress_bars()


def test_push_http_500_is_one_line_and_changes_nothing(capsys, hub, online, bro_dir, copy_of, no_progress_bars):
    folder = copy_of(bro_dir)
    before = folder_hashes(folder)
    assert MODEL_ID_PLACEHOLDER in (folder / "README.md").read_text()
    with hub.fail(500, method="POST", path=r"/api/models/org/broken/commit/.*") as fault:
        line = user_error(capsys, ["push", str(folder), "org/broken"])
    assert fault.hits == 1
    assert f"push of {folder} to org/broken failed: the Hub answered HTTP 500 for POST" in line
    assert "try again later" in line and "(the local folder is unchanged)" in line
    assert folder_hashes(folder) == before
    assert "README.md" not in hub.files("org/broken")  # nothing was committed

    with hub.fail(500, path=r"/api/repos/create"):
        line = user_error(capsys, ["push", str(folder), "org/broken2"])
    assert "HTTP 500 for POST" in line and "/api/repos/create" in line
    assert folder_hashes(folder) == before

    with hub.fail(401, path=r"/api/repos/create"):
        line = user_error(capsys, ["push", str(folder), "org/private"])
    assert "HTTP 401" in line and "hf auth login" in line

    line = user_error(capsys, ["push", str(folder), "not a repo id!"])
    assert "invalid repo id" in line
    assert folder_hashes(folder) == before

    # the corrected push: one commit, the card carries the real repo id, the local folder is still byte-identical
    capsys.readouterr()
    assert main(["push", str(folder), "org/fixed"]) == 0
    assert folder_hashes(folder) == before
    stored = hub.files("org/fixed")
    card = stored["README.md"].decode()
    assert 'from_pretrained("org/fixed")' in card and MODEL_ID_PLACEHOLDER not in card and "org/broken" not in card
    assert card == (folder / "README.md").read_text().replace(MODEL_ID_PLACEHOLDER, "org/fixed")
    assert stored["model.safetensors"] == (folder / "model.safetensors").read_bytes()
    commits = [p for m, p in hub.requests if m == "POST" and p.startswith("/api/models/org/fixed/commit/")]
    assert len(commits) == 1


def test_push_dead_endpoint_is_one_line(capsys, tmp_path, bro_dir, copy_of):
    folder = copy_of(bro_dir)
    before = folder_hashes(folder)
    with LoopbackHub() as dead:
        pass  # stopped: its port refuses connections
    with use_loopback_hub(dead, cache_dir=tmp_path / "cache"):
        line = user_error(capsys, ["push", str(folder), "org/x"])
    assert f"cannot reach the Hub at {dead.url} (ConnectError" in line and "check the network, HF_ENDPOINT" in line
    assert folder_hashes(folder) == before


def test_push_offline_is_one_line(capsys, bro_dir, copy_of):
    folder = copy_of(bro_dir)
    before = folder_hashes(folder)
    line = user_error(capsys, ["push", str(folder), "org/x"])  # the suite runs with HF_HUB_OFFLINE=1
    assert "cannot reach the Hub: offline mode is on (HF_HUB_OFFLINE=1)" in line
    assert folder_hashes(folder) == before
    assert "Traceback" in debug_error(capsys, ["push", str(folder), "org/x"])
    line = user_error(capsys, ["push", str(folder.parent / "nothing"), "org/x"])
    assert "is not a saved model folder (no config.json)" in line


def test_push_prints_no_http_lines(caplog, capsys, hub, online, bro_dir, copy_of, no_progress_bars):
    folder = copy_of(bro_dir)
    caplog.set_level(logging.INFO)
    assert main(["push", str(folder), "org/quiet"]) == 0
    http = [r for r in caplog.records if r.name.split(".")[0] in ("httpx", "httpx2", "huggingface_hub")]
    assert [r.getMessage() for r in http if r.levelno < logging.WARNING] == []
    assert logging.getLogger("httpx2").level == logging.NOTSET  # restored after the push
    assert any("Uploaded" in r.getMessage() for r in caplog.records if r.name == "hf_jepa.hub")


def test_a_non_finite_loss_stops_training_with_one_line(capsys, tmp_path):
    # lr 1e30 blows the weights up at the first step: the loss of step 2 is NaN (nan_policy=stop, the default)
    argv = [
        "train",
        "bro-jepa",
        "--set",
        "preset=tiny",
        "max_steps=6",
        "data=embedded",
        "learning_rate=1e30",
        "warmup_steps=0",
        "plot=false",
        "disable_progress_bar=true",
        "--output-dir",
        str(tmp_path / "run"),
    ]
    line = user_error(capsys, argv)
    assert "non-finite loss" in line and "optimiser step 2" in line and "nan_policy='skip'" in line
