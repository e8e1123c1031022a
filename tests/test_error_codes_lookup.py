"""ErrorCode.from_code reads every answer's error code: a dict of the values, the same result as
the Enum's own lookup (and UNKNOWN_SERVER_ERROR for a code it does not know)."""

from __future__ import annotations

from grouplab.protocol.errors import ErrorCode


def test_from_code_is_the_enums_lookup() -> None:
    for code in list(ErrorCode) + [int(c) for c in ErrorCode]:
        assert ErrorCode.from_code(code) is ErrorCode(code)
    for unknown in (9999, -2, 10_000):
        assert ErrorCode.from_code(unknown) is ErrorCode.UNKNOWN_SERVER_ERROR
