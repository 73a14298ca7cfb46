"""`make run` until the pipeline lands: a short self-check of the installed package."""

from __future__ import annotations


def main() -> int:
    import samsa

    print(f"samsa {samsa.__version__}: package imports")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
