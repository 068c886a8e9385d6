"""Plain English the package speaks and reads: counts of things for a message, and the function words left
out when texts are compared by their content words (the evaluation's scoring and the fake model's answers)."""

STOPWORDS = frozenset("""a an and the he she it they we i you his her its their our my your this that these those
there here then when what which who whom why how if in on at to of for from by with as but or nor so yet not no
yes all any each every some one two mr mrs ms dr sir lady lord after before while during since until upon into
about above below up down out over under again once also only just very chapter is are was were be been has
have had do does did main""".split())  # noqa: SIM905


def counted(n: int, thing: str) -> str:
    """`n` things, in the singular for one."""
    return f"{n:,} {thing}" if n == 1 else f"{n:,} {thing}{'es' if thing.endswith('ch') else 's'}"
