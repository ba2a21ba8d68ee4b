"""Visibility tables: each namespace's custom search attributes and one searchable record per run."""

from __future__ import annotations

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from tenants.models import Namespace
from visibility import slots


class CustomSearchAttribute(models.Model):
    """A custom search attribute registered in a namespace (OperatorService AddSearchAttributes)."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    name = models.CharField(max_length=64)
    type = models.SmallIntegerField()
    """temporal.api.enums.v1.IndexedValueType."""
    slot = models.CharField(max_length=16, null=True)  # noqa: DJ001
    """The record's typed column holding this attribute's values (visibility.slots), or None: JSON only."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="custom_sa_unique_name"),
            # NULLs are distinct: any number of attributes may have no slot.
            models.UniqueConstraint(fields=["namespace", "slot"], name="custom_sa_unique_slot"),
        ]


class CodePointTextField(models.TextField):
    """Text compared and ordered by code point: collation "C" on Postgres (SQLite's BINARY already is).

    Keyword comparisons are in code-point order on every backend; with the column's own collation "C"
    its index serves them (an index in the database's collation cannot answer `COLLATE "C"`).
    """

    def db_parameters(self, connection: BaseDatabaseWrapper) -> dict[str, str | None]:
        params = super().db_parameters(connection)
        if connection.vendor == "postgresql":
            params["collation"] = "C"
        return params


DEFAULT_ORDER = ["-close_sort", "-start_time", "-execution"]
"""Temporal's listing order (open runs first, then newest close, newest start), and the page token's key."""
DEFAULT_ORDER_ARCHIVED = ["-close_sort", "-start_time", "-execution_id"]
"""The same order in the archive index, whose row id is the run's former row id."""


class RecordColumns(models.Model):
    """The columns of a run's visibility record, shared by the live records and the archive index."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    workflow_id = models.CharField(max_length=1000)
    run_id = models.CharField(max_length=64)
    workflow_type = models.CharField(max_length=1000)
    task_queue = models.CharField(max_length=1000)
    status = models.SmallIntegerField()
    start_time = models.BigIntegerField()
    execution_time = models.BigIntegerField()
    close_time = models.BigIntegerField(null=True)
    close_sort = models.BigIntegerField()
    """close_time, or the largest value while running: open runs list first, as in Temporal."""
    execution_duration = models.BigIntegerField(null=True)
    history_length = models.BigIntegerField(default=0)
    history_size_bytes = models.BigIntegerField(default=0)
    state_transition_count = models.BigIntegerField(default=0)
    # NULL, not "", for a run without a parent: filters treat it as a missing attribute (IS NULL).
    parent_workflow_id = models.CharField(max_length=1000, null=True)  # noqa: DJ001
    parent_run_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    root_workflow_id = models.CharField(max_length=1000)
    root_run_id = models.CharField(max_length=64)
    first_run_id = models.CharField(max_length=64, default="")
    memo = models.BinaryField(default=b"")
    """The run's memo (a serialized Memo), sealed under the namespace's data key like its state."""
    search_attributes = models.BinaryField(default=b"")
    """The run's search attribute map as given (a serialized SearchAttributes), returned by list."""
    custom = models.JSONField(default=dict)
    """Typed values of the map's attributes by name (see visibility.search_attributes.decode_value)."""
    # Slot columns (visibility.slots.SLOTS): copies of custom values, written with the record.
    keyword01 = CodePointTextField(null=True)
    keyword02 = CodePointTextField(null=True)
    keyword03 = CodePointTextField(null=True)
    keyword04 = CodePointTextField(null=True)
    keyword05 = CodePointTextField(null=True)
    keyword06 = CodePointTextField(null=True)
    keyword07 = CodePointTextField(null=True)
    keyword08 = CodePointTextField(null=True)
    keyword09 = CodePointTextField(null=True)
    keyword10 = CodePointTextField(null=True)
    int01 = models.BigIntegerField(null=True)
    int02 = models.BigIntegerField(null=True)
    int03 = models.BigIntegerField(null=True)
    double01 = models.FloatField(null=True)
    double02 = models.FloatField(null=True)
    double03 = models.FloatField(null=True)
    bool01 = models.BooleanField(null=True)
    bool02 = models.BooleanField(null=True)
    bool03 = models.BooleanField(null=True)
    datetime01 = models.BigIntegerField(null=True)
    """Microseconds since the epoch, like the system time columns."""
    datetime02 = models.BigIntegerField(null=True)
    datetime03 = models.BigIntegerField(null=True)

    class Meta:
        abstract = True


class VisibilityRecord(RecordColumns):
    """What list and count filters see of one run, written in the run's own transactions.

    System attributes are typed columns; times are microseconds since the epoch (exact equality and
    ordering on SQLite and Postgres alike) and ExecutionDuration is nanoseconds, as Temporal counts it.
    Custom and predefined map attributes are one JSON document of typed values (`custom`): jsonb with
    a GIN index on Postgres, JSON1 on SQLite. Custom Keyword, Int, Double, Bool and Datetime attributes
    are also copied into the namespace's typed slot columns (visibility.slots), each with a partial
    index: NULL (not indexed) where the run has no value, or the namespace no attribute in that slot.
    """

    execution = models.OneToOneField(
        "engine.Execution", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )

    class Meta:
        indexes = [
            models.Index(fields=["namespace", *DEFAULT_ORDER], name="vis_by_order"),
            models.Index(fields=["namespace", "workflow_id"], name="vis_by_workflow_id"),
            # Each ends in the whole default order, so one equality and the order are a single range scan
            # (an index ending in close_sort alone sorts every open run it matches: they share close_sort).
            models.Index(fields=["namespace", "workflow_type", *DEFAULT_ORDER], name="vis_type_order"),
            models.Index(fields=["namespace", "status", *DEFAULT_ORDER], name="vis_status_order"),
            models.Index(fields=["namespace", "task_queue", *DEFAULT_ORDER], name="vis_queue_order"),
            models.Index(fields=["namespace", "-start_time", "-execution"], name="vis_start_order"),
            models.Index(fields=["namespace", "run_id"], name="vis_by_run_id"),
            models.Index(fields=["namespace", "parent_workflow_id"], name="vis_by_parent"),
            # One per slot, partial: an equality and the default order is one range scan, a range on the
            # slot an index range; runs without a value (namespaces not using the slot) are not indexed.
            *(
                models.Index(
                    fields=["namespace", slot, *DEFAULT_ORDER],
                    name=f"vis_slot_{slot}",
                    condition=models.Q(**{f"{slot}__isnull": False}),
                )
                for slot in slots.COLUMNS
            ),
        ]


class ArchivedVisibilityRecord(RecordColumns):
    """A closed run's visibility record kept in the archive index, when its namespace archives visibility.

    Copied from the run's live record in the transaction that closes it (engine/persistence/retention.py),
    and kept after retention deletes the run: ListArchivedWorkflowExecutions filters these with the whole
    list-filter language (visibility.backends.sql, the same compiler). `execution_id` is the row id the
    run had (never reused); the memo stays sealed as it was, so erasing a data subject erases it here too.
    """

    execution_id = models.BigIntegerField(primary_key=True)
    uri = models.CharField(max_length=1024, default="")
    """The namespace's visibility archival URI when the run closed: where its visibility was archived."""

    class Meta:
        indexes = [
            models.Index(fields=["namespace", *DEFAULT_ORDER_ARCHIVED], name="vis_arch_by_order"),
            models.Index(fields=["namespace", "workflow_id"], name="vis_arch_by_workflow_id"),
            models.Index(
                fields=["namespace", "workflow_type", *DEFAULT_ORDER_ARCHIVED], name="vis_arch_type_order"
            ),
            models.Index(
                fields=["namespace", "status", *DEFAULT_ORDER_ARCHIVED], name="vis_arch_status_order"
            ),
            models.Index(fields=["namespace", "run_id"], name="vis_arch_by_run_id"),
            *(
                models.Index(
                    fields=["namespace", slot, *DEFAULT_ORDER_ARCHIVED],
                    name=f"vis_arch_slot_{slot}",
                    condition=models.Q(**{f"{slot}__isnull": False}),
                )
                for slot in slots.COLUMNS
            ),
        ]
