"""Thin online-only loaders for the T-JEPA paper's downstream sets: `load_imdb`, `load_snli`, `load_fever`,
`load_ms_marco` (Hub ids in `hf_jepa.data.sources`). Offline they raise RuntimeError pointing at the embedded tasks."""

import logging

import datasets

from ..sources import FEVER_HUB_ID, IMDB_HUB_ID, MS_MARCO_HUB_ID, SNLI_HUB_ID, is_offline

logger = logging.getLogger(__name__)


def _load_online(hub_id: str, *args, **kwargs):
    if is_offline():
        raise RuntimeError(
            f"{hub_id} is only on the Hub and HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set; unset them to download it, "
            "or evaluate offline with topic_classification_task() / retrieval_task() on the embedded corpus"
        )
    try:
        dataset = datasets.load_dataset(hub_id, *args, **kwargs)
    except Exception as error:  # noqa: BLE001 - a network or Hub failure: say what to do instead
        raise RuntimeError(
            f"could not load {hub_id} ({type(error).__name__}: {error}); offline, use topic_classification_task() "
            "or retrieval_task() on the embedded corpus"
        ) from error
    logger.info("Loaded %s from the Hub", hub_id)
    return dataset


def load_imdb(hub_id: str = IMDB_HUB_ID, **kwargs):
    """IMDB sentiment (`stanfordnlp/imdb`: 25k train / 25k test reviews, `text` + `label`). Online only."""
    return _load_online(hub_id, **kwargs)


def load_snli(hub_id: str = SNLI_HUB_ID, **kwargs):
    """SNLI (`stanfordnlp/snli`: `premise`, `hypothesis`, `label`, -1 where there is no gold label). Online only."""
    return _load_online(hub_id, **kwargs)


def load_fever(name: str = "default", hub_id: str = FEVER_HUB_ID, **kwargs):
    """FEVER in its BEIR/MTEB retrieval form (`mteb/fever`; configs `default` = qrels, `corpus`, `queries`). Online
    only. Pass another `hub_id` (and `name`) for a claim-verification version."""
    return _load_online(hub_id, name, **kwargs)


def load_ms_marco(name: str = "v1.1", hub_id: str = MS_MARCO_HUB_ID, **kwargs):
    """MS MARCO passage ranking (`microsoft/ms_marco`, config `v1.1` or `v2.1`). Online only."""
    return _load_online(hub_id, name, **kwargs)
