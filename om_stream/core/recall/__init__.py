"""The recall tool, pure: arguments and scope, paging, rendering within the token budget, instructions, groups.

The I/O half (reading the content store and the recall index, access control) is
``om_stream.runtime.recall_service``; this package only turns values into values.
"""

from om_stream.core.recall.groups import (
    format_ranges,
    group_heading,
    observation_ranges,
    ranges_from_json,
    ranges_to_json,
    reflection_ranges,
)
from om_stream.core.recall.instructions import recall_instructions
from om_stream.core.recall.params import CURRENT_THREAD, RecallArguments, RecallScope, parse_arguments
from om_stream.core.recall.records import (
    GenerationRecord,
    MessagePage,
    MessagePosition,
    MessageRange,
    ObservationGroup,
    RecallHit,
    StoredMessage,
    ThreadPage,
    ThreadSummary,
)
from om_stream.core.recall.results import MessagesResult, RecallResult, SearchResult, ThreadsResult

__all__ = [
    "CURRENT_THREAD",
    "GenerationRecord",
    "MessagePage",
    "MessagePosition",
    "MessageRange",
    "MessagesResult",
    "ObservationGroup",
    "RecallArguments",
    "RecallHit",
    "RecallResult",
    "RecallScope",
    "SearchResult",
    "StoredMessage",
    "ThreadPage",
    "ThreadSummary",
    "ThreadsResult",
    "format_ranges",
    "group_heading",
    "observation_ranges",
    "parse_arguments",
    "ranges_from_json",
    "ranges_to_json",
    "recall_instructions",
    "reflection_ranges",
]
