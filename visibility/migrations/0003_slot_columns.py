# Typed slot columns (as Temporal's SQL visibility: Keyword01..10, Int01..03, Double01..03, Bool01..03,
# Datetime01..03), each with a partial index (namespace, slot, default order) WHERE slot IS NOT NULL; the
# slot of each existing attribute (lowest free of its type, in registration order) and the columns filled
# from the records' JSON documents, before the indexes are built (see README, Visibility).

from collections import defaultdict

from django.db import migrations, models

import visibility.models

ORDER = ["-close_sort", "-start_time", "-execution"]
# Frozen here (visibility.slots.SLOTS at the time of writing), by IndexedValueType.
KEYWORD, INT, DOUBLE, BOOL, DATETIME = 2, 3, 4, 5, 6
SLOTS = {
    KEYWORD: [f"keyword{i:02d}" for i in range(1, 11)],
    INT: ["int01", "int02", "int03"],
    DOUBLE: ["double01", "double02", "double03"],
    BOOL: ["bool01", "bool02", "bool03"],
    DATETIME: ["datetime01", "datetime02", "datetime03"],
}
COLUMNS = [slot for slots in SLOTS.values() for slot in slots]


def _field(t):
    if t == KEYWORD:
        return visibility.models.CodePointTextField(null=True)
    if t == DOUBLE:
        return models.FloatField(null=True)
    if t == BOOL:
        return models.BooleanField(null=True)
    return models.BigIntegerField(null=True)


# The value of a slot of each type from the JSON document, NULL unless the stored JSON value has that
# type (a name re-registered with another type may still hold values of the old one). Parameters: the
# name (Postgres) or its JSON path (SQLite), once per placeholder.
_POSTGRES = {
    KEYWORD: "CASE WHEN jsonb_typeof(custom -> %s) = 'string' THEN custom ->> %s END",
    BOOL: "CASE WHEN jsonb_typeof(custom -> %s) = 'boolean' THEN (custom ->> %s)::boolean END",
    DOUBLE: (
        "CASE WHEN jsonb_typeof(custom -> %s) = 'number' THEN CASE WHEN abs((custom ->> %s)::numeric) < 1e300 "
        "THEN (custom ->> %s)::double precision END END"
    ),
    INT: (
        "CASE WHEN jsonb_typeof(custom -> %s) = 'number' THEN CASE WHEN scale((custom ->> %s)::numeric) = 0 "
        "AND (custom ->> %s)::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 "
        "THEN (custom ->> %s)::bigint END END"
    ),
}
_POSTGRES[DATETIME] = _POSTGRES[INT]
_SQLITE = {
    KEYWORD: "CASE WHEN json_type(custom, %s) = 'text' THEN json_extract(custom, %s) END",
    BOOL: "CASE json_type(custom, %s) WHEN 'true' THEN 1 WHEN 'false' THEN 0 END",
    DOUBLE: "CASE WHEN json_type(custom, %s) IN ('integer', 'real') THEN CAST(json_extract(custom, %s) AS REAL) END",
    INT: "CASE WHEN json_type(custom, %s) = 'integer' THEN json_extract(custom, %s) END",
}
_SQLITE[DATETIME] = _SQLITE[INT]


def assign_and_fill(apps, schema_editor):
    CustomSearchAttribute = apps.get_model("visibility", "CustomSearchAttribute")
    connection = schema_editor.connection
    postgres = connection.vendor == "postgresql"
    assigned = defaultdict(dict)  # namespace -> {name: (type, slot)}
    for attr in CustomSearchAttribute.objects.order_by("namespace_id", "id"):
        taken = {slot for _, slot in assigned[attr.namespace_id].values()}
        slot = next((s for s in SLOTS.get(attr.type, ()) if s not in taken), None)
        if slot is None:
            continue  # Text, KeywordList: the JSON document only
        assigned[attr.namespace_id][attr.name] = (attr.type, slot)
        attr.slot = slot
        attr.save(update_fields=["slot"])
    # One UPDATE per namespace, so no record is rewritten twice (on Postgres a second rewrite in the
    # same transaction would also queue foreign-key checks that keep CREATE INDEX from running).
    for namespace_id, attributes in assigned.items():
        sets, present, params, where_params = [], [], [], []
        for name, (t, slot) in attributes.items():
            expression = (_POSTGRES if postgres else _SQLITE)[t]
            key = name if postgres else '$."' + name + '"'
            sets.append(f"{slot} = {expression}")
            params += [key] * expression.count("%s")
            present.append("(custom -> %s) IS NOT NULL" if postgres else "json_type(custom, %s) IS NOT NULL")
            where_params.append(key)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE visibility_visibilityrecord SET {', '.join(sets)} "
                f"WHERE namespace_id = %s AND ({' OR '.join(present)})",
                [*params, namespace_id if postgres else namespace_id.hex, *where_params],
            )


class Migration(migrations.Migration):
    dependencies = [
        ("visibility", "0002_indexes_in_default_order"),
    ]

    operations = [
        migrations.AddField(
            model_name="customsearchattribute",
            name="slot",
            field=models.CharField(max_length=16, null=True),
        ),
        migrations.AddConstraint(
            model_name="customsearchattribute",
            constraint=models.UniqueConstraint(fields=("namespace", "slot"), name="custom_sa_unique_slot"),
        ),
        *(
            migrations.AddField(model_name="visibilityrecord", name=slot, field=_field(t))
            for t, slots in SLOTS.items()
            for slot in slots
        ),
        migrations.RunPython(assign_and_fill, migrations.RunPython.noop),
        *(
            migrations.AddIndex(
                model_name="visibilityrecord",
                index=models.Index(
                    fields=["namespace", slot, *ORDER],
                    name=f"vis_slot_{slot}",
                    condition=models.Q(**{f"{slot}__isnull": False}),
                ),
            )
            for slot in COLUMNS
        ),
    ]
