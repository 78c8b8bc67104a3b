"""`python -m cmrkit` and the `cmrkit` script: signal handling starts before the slow imports."""

from __future__ import annotations


def main() -> None:
    """Console-script entry point."""
    from cmrkit import interrupts

    with interrupts.handling():
        try:
            from cmrkit.cli import main as run
        except interrupts.Interrupted as e:
            interrupts.report(e)
            raise SystemExit(e.exit_code) from None
        run()


if __name__ == "__main__":
    main()
