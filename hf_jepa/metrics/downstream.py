"""Downstream evaluation of frozen text encoders: pooled embeddings, linear probes, retrieval recall, and the paper's
online sets (IMDB, SNLI, MS MARCO)."""

import torch

from ..data.text import load_imdb, load_ms_marco, load_snli


@torch.no_grad()
def embed_texts(model, tokenizer, texts: list[str], max_length: int, batch_size: int = 128) -> torch.Tensor:
    """Pooled target-encoder embeddings `(N, hidden)` of texts (eval mode, truncated to `max_length`)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    chunks = []
    try:
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[start : start + batch_size],
                max_length=max_length,
                truncation=True,
                padding=True,
                return_tensors="pt",
            )
            chunks.append(model.embed(batch["input_ids"].to(device), batch["attention_mask"].to(device)).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(chunks)


def linear_probe_accuracy(train_x, train_y, test_x, test_y) -> float:
    """Accuracy of a logistic-regression probe on standardised frozen embeddings."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(train_x.numpy())
    probe = LogisticRegression(max_iter=2000).fit(scaler.transform(train_x.numpy()), list(train_y))
    return float(probe.score(scaler.transform(test_x.numpy()), list(test_y)))


def retrieval_recall(query_embeddings, document_embeddings, positives: list[list[int]], ks=(1, 10)) -> dict[str, float]:
    """Recall@k of cosine-similarity retrieval: the fraction of queries with a relevant document in the top k."""
    similarity = (
        torch.nn.functional.normalize(query_embeddings, dim=-1)
        @ torch.nn.functional.normalize(document_embeddings, dim=-1).T
    )
    ranked = similarity.topk(max(ks), dim=1).indices
    out = {}
    for k in ks:
        hits = [bool(set(ranked[i, :k].tolist()) & set(p)) for i, p in enumerate(positives)]
        out[f"retrieval_recall_at_{k}"] = sum(hits) / len(hits)
    return out


def online_downstream(model, tokenizer, max_length: int, num_examples: int = 2000, seed: int = 0) -> dict[str, float]:
    """The paper's downstream sets, read from the Hub through `datasets` (online only; offline it raises with a
    pointer to the embedded tasks): linear probes on frozen pooled embeddings for IMDB sentiment and SNLI
    (premise and hypothesis as one `[SEP]`-joined pair), and MS MARCO passage ranking (MRR@10 of each query's own
    candidate passages by cosine similarity). At most `num_examples` shuffled rows per split. FEVER (`load_fever`)
    loads too; its 5M-passage corpus is left out of this CPU-sized evaluation."""
    metrics = {}
    imdb = load_imdb()
    train, test = (
        imdb[split].shuffle(seed=seed).select(range(min(num_examples, imdb[split].num_rows)))
        for split in ("train", "test")
    )
    metrics["imdb_probe_accuracy"] = linear_probe_accuracy(
        embed_texts(model, tokenizer, list(train["text"]), max_length),
        train["label"],
        embed_texts(model, tokenizer, list(test["text"]), max_length),
        test["label"],
    )
    snli = load_snli()
    pairs = {}
    for split in ("train", "test"):
        rows = snli[split].filter(lambda row: row["label"] >= 0).shuffle(seed=seed)
        rows = rows.select(range(min(num_examples, rows.num_rows)))
        texts = [f"{p} {tokenizer.sep_token} {h}" for p, h in zip(rows["premise"], rows["hypothesis"])]
        pairs[split] = (embed_texts(model, tokenizer, texts, max_length), rows["label"])
    metrics["snli_probe_accuracy"] = linear_probe_accuracy(*pairs["train"], *pairs["test"])
    marco = load_ms_marco(split="validation").shuffle(seed=seed).select(range(min(num_examples // 4, 500)))
    reciprocal_ranks = []
    for row in marco:
        passages, selected = row["passages"]["passage_text"], row["passages"]["is_selected"]
        if not any(selected):
            continue
        query = embed_texts(model, tokenizer, [row["query"]], max_length)
        scores = (
            torch.nn.functional.normalize(query, dim=-1)
            @ torch.nn.functional.normalize(embed_texts(model, tokenizer, passages, max_length), dim=-1).T
        )[0]
        ranks = [int((scores > scores[i]).sum()) + 1 for i, chosen in enumerate(selected) if chosen]
        reciprocal_ranks.append(1.0 / min(ranks) if min(ranks) <= 10 else 0.0)
    metrics["ms_marco_mrr_at_10"] = sum(reciprocal_ranks) / max(len(reciprocal_ranks), 1)
    return metrics
