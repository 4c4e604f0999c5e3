"""The API's JSON parser: DRF's, refusing a string that holds a lone surrogate (a ``\\ud800`` escape), which no
database or log can encode: a search query holding one was a 500 (``mcpgateway.guards.lone_surrogate_in``)."""

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from mcpgateway.guards import lone_surrogate_in


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if lone_surrogate_in(data):
            raise ParseError("JSON parse error - a string holds a lone surrogate (not a Unicode character)")
        return data
