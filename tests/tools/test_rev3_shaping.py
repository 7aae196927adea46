"""rev3: an upstream's answer must never make shaping raise anything but ShapingError (tools.http_call promises
"never raises for anything the tenant, the model or the upstream can cause")."""

from tools.shaping import ShapingError, shape_response


def test_a_deeply_nested_field_value_is_unreadable_or_shown_never_a_crash():
    crashed = []
    for depth in range(850, 1010):
        body = ('{"status": ' + "[" * depth + "]" * depth + "}").encode()
        try:
            shape_response(body=body, response_config={"fields": [{"path": "status"}]})
        except ShapingError:
            pass
        except RecursionError:
            crashed.append(depth)
    assert crashed == []
