package query

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestAppendStringPrefixMatchesEncodingJSON(t *testing.T) {
	s := "plain \"q\" \\ \n\r\t \x01 é 日本 😀 \u2028 <tag> &amp;"
	got := AppendString(nil, s)
	var back string
	if err := json.Unmarshal(got, &back); err != nil || back != s {
		t.Fatalf("round trip: %q, %v", back, err)
	}
	if whole, _ := AppendStringPrefix(nil, []byte(s), -1); string(whole) != string(got) {
		t.Fatalf("AppendStringPrefix without a limit = %s, AppendString = %s", whole, got)
	}
	for max := 2; max < utf8.RuneCount(got)+2; max++ {
		part, n := AppendStringPrefix(nil, []byte(s), max)
		if utf8.RuneCount(part) > max {
			t.Fatalf("max %d: %d characters", max, utf8.RuneCount(part))
		}
		if err := json.Unmarshal(part, &back); err != nil || back != s[:n] {
			t.Fatalf("max %d: %q is not the prefix %q (%v)", max, back, s[:n], err)
		}
	}
}

func TestEachMember(t *testing.T) {
	type m struct{ Key, Name, Value string }
	var got []m
	err := EachMember([]byte(` { "a" : 1, "b\u00e9":{"x":[1,2]} ,"c":"s"} `), func(key []byte, name string, value []byte) {
		got = append(got, m{string(key), name, string(value)})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []m{{`"a"`, "a", "1"}, {`"b\u00e9"`, "bé", `{"x":[1,2]}`}, {`"c"`, "c", `"s"`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`[1]`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{"a":1`} {
		if err := EachMember([]byte(bad), func([]byte, string, []byte) {}); err == nil {
			t.Errorf("EachMember(%s) = nil, want an error", bad)
		}
	}
}

func TestSetMembersAndInsertFirst(t *testing.T) {
	got, err := SetMembers([]byte(`{"a":1,"b":2}`), []Member{{"b", []byte(`"two"`)}, {"_c", []byte(`[3]`)}})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"a":1,"b":"two","_c":[3]}` {
		t.Errorf("SetMembers = %s", got)
	}
	if _, err := SetMembers([]byte(`[1]`), []Member{{"a", []byte(`1`)}}); err == nil {
		t.Error("SetMembers on an array: want an error")
	}
	for in, want := range map[string]string{`{}`: `{"k":"v"}`, ` { "a":1}`: `{"k":"v","a":1}`} {
		if got := InsertFirst([]byte(in), "k", []byte(`"v"`)); string(got) != want {
			t.Errorf("InsertFirst(%s) = %s, want %s", in, got, want)
		}
	}
	obj := CloseObject(AppendMember(AppendMember(nil, "a", []byte("1")), "b\"", []byte("2")))
	if string(obj) != `{"a":1,"b\"":2}` {
		t.Errorf("AppendMember = %s", obj)
	}
}
