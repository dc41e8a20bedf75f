"""Write the embedded default's tokenizer, `cudal1/policy/small_tokenizer.json`.

    python scripts/build_small_tokenizer.py [--out PATH] [--vocab 4096]

Trains the byte-level BPE tokenizer of `cudal1.policy.small.train_tokenizer` on the .py files of
the cudal1 package as it is checked out (reference programs and seed solutions included). Run it
only to change the default model on purpose: every default model built afterwards (`init_small`,
the main job's embedded default) gets the new tokenizer, so re-check that the README's first
command still learns (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cudal1.policy.small import SHIPPED_TOKENIZER, SHIPPED_VOCAB, corpus_files, train_tokenizer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=SHIPPED_TOKENIZER)
    ap.add_argument("--vocab", type=int, default=SHIPPED_VOCAB)
    args = ap.parse_args(argv)
    files = corpus_files()
    tok = train_tokenizer(files, args.vocab)
    tok.save(str(args.out))
    print(f"{args.out}: {tok.get_vocab_size()} tokens from {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
