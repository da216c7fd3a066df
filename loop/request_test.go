package loop

import (
	"errors"
	"strings"
	"testing"
)

// ParseRequest is the one parser of reserved arguments: every mistake is
// a ToolError whose code names the argument and whose message names the
// clause and the key.
func TestParseRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args map[string]any
		code string
		want string
	}{
		{"unknown op", map[string]any{"_filter": []any{map[string]any{"field": "a", "op": "like", "value": 1}}},
			CodeInvalidFilter, `_filter clause 0 {"field":"a","op":"like","value":1}: unknown op "like"`},
		{"misspelt key", map[string]any{"_filter": map[string]any{"field": "a", "op": "eq", "valu": 1}},
			CodeInvalidFilter, `clause 0 {"field":"a","op":"eq"}: unknown key "valu"; a clause has only field, op, value`},
		{"field not a string", map[string]any{"_filter": []any{map[string]any{"field": 3, "op": "eq", "value": 1}}},
			CodeInvalidFilter, `field must be a string, not a number`},
		{"filter not a list", map[string]any{"_filter": "a > 1"}, CodeInvalidFilter, `_filter must be a clause`},
		{"fields wrong type", map[string]any{"_fields": 3}, CodeInvalidFields, `_fields must be an array of dot-paths`},
		{"fields bad path", map[string]any{"_fields": []any{"a..b"}}, CodeInvalidFields, `_fields `},
		{"for_each unknown key", map[string]any{"_for_each": map[string]any{"key": "k", "value": []any{1}}},
			CodeInvalidForEach, `_for_each has an unknown key "value"`},
		{"for_each no key", map[string]any{"_for_each": map[string]any{"values": []any{1}}},
			CodeInvalidForEachKey, `_for_each key is missing`},
		{"for_each empty", map[string]any{"_for_each": map[string]any{"key": "k", "values": []any{}}},
			CodeInvalidForEach, `values must not be empty`},
		{"all_pages wrong type", map[string]any{"_all_pages": 1.0}, CodeInvalidArgument, `_all_pages must be true or false`},
		{"max_chars too small", map[string]any{"_max_chars": 10.0}, CodeInvalidArgument, `_max_chars must be a whole number from 1000 to 1000000, not 10`},
		{"max_chars not whole", map[string]any{"_max_chars": 2000.5}, CodeInvalidArgument, `not 2000.5`},
		{"max_chars a string", map[string]any{"_max_chars": "2000"}, CodeInvalidArgument, `_max_chars must be a whole number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseRequest(tc.args)
			var te *ToolError
			if !errors.As(err, &te) || te.Code != tc.code || !strings.Contains(te.Message, tc.want) {
				t.Errorf("err = %v; want code %s and a message containing %q", err, tc.code, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.code+": ") {
				t.Errorf("Error() = %q lacks its code", err.Error())
			}
		})
	}
	own, r, err := ParseRequest(map[string]any{"status": "open", "_all_pages": "true", "_fields": "id, customer.name",
		"_filter": []any{map[string]any{"field": "total", "op": ">", "value": 10}}, "_refresh": nil, "_max_chars": 5000.0})
	if err != nil || len(own) != 1 || own["status"] != "open" || !r.AllPages || r.Refresh || r.Fields == nil || r.Filter == nil || r.MaxChars != 5000 ||
		strings.Join(r.Fields.Paths(), ",") != "id,customer.name" {
		t.Errorf("good arguments: own %v, request %+v, err %v", own, r, err)
	}
}
