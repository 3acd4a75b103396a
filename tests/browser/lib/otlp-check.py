"""Checks an OTLP/JSON file with the official OpenTelemetry protobuf classes.

Usage: otlp-check.py FILE. Parses it as an ExportTraceServiceRequest with
google.protobuf.json_format (unknown fields refused), checks the OTLP/JSON
rules json_format does not know (trace and span ids in hex, not base64), and
prints a JSON summary of the spans for the browser test. Exit 1 on any fault.
"""
import json
import re
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

text = open(sys.argv[1], encoding="utf-8").read()
try:
    request = json_format.Parse(text, ExportTraceServiceRequest(), ignore_unknown_fields=False)
except json_format.ParseError as e:
    print(json.dumps({"ok": False, "error": str(e)}))
    sys.exit(1)

raw = json.loads(text)
faults = []
spans = []
for rs in raw.get("resourceSpans", []):
    for ss in rs.get("scopeSpans", []):
        for s in ss.get("spans", []):
            if not re.fullmatch(r"[0-9a-f]{32}", s.get("traceId", "")):
                faults.append("traceId " + s.get("traceId", ""))
            if not re.fullmatch(r"[0-9a-f]{16}", s.get("spanId", "")):
                faults.append("spanId " + s.get("spanId", ""))
            if s.get("parentSpanId") and not re.fullmatch(r"[0-9a-f]{16}", s["parentSpanId"]):
                faults.append("parentSpanId " + s["parentSpanId"])

for rs in request.resource_spans:
    for ss in rs.scope_spans:
        for s in ss.spans:
            attrs = {}
            for kv in s.attributes:
                which = kv.value.WhichOneof("value")
                value = getattr(kv.value, which) if which else None
                if which == "array_value":
                    value = [getattr(v, v.WhichOneof("value")) for v in value.values]
                attrs[kv.key] = value
            spans.append({
                "name": s.name,
                "kind": s.kind,
                "parent": s.parent_span_id.hex(),
                "span_id": s.span_id.hex(),
                "start": s.start_time_unix_nano,
                "end": s.end_time_unix_nano,
                "status": s.status.code,
                "attributes": attrs,
                "events": [e.name for e in s.events],
            })

print(json.dumps({"ok": not faults, "faults": faults, "spans": spans}, default=str))
sys.exit(1 if faults else 0)
