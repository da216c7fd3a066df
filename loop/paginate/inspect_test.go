package paginate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/tools"
)

func TestInspectionJSON(t *testing.T) {
	paged := &tools.Tool{Name: "GetCustomers", Method: "get", Path: "/v1/customers", OperationID: "GetCustomers",
		Params:   []tools.Param{qp("limit", sInt()), qp("starting_after", sStr())},
		Response: sObj(map[string]*tools.Schema{"data": sArr(item("id")), "has_more": sBool()})}
	single := &tools.Tool{Name: "get_balance", Method: "GET", Path: "/v1/balance",
		Response: sObj(map[string]*tools.Schema{"available": sArr(sAny()), "object": sStr()})}
	trap := &tools.Tool{Name: "getUsersForWorkspace", Method: "GET", Path: "/workspaces/{workspace_gid}/users",
		OperationID: "getUsersForWorkspace",
		Params:      []tools.Param{pathParam("workspace_gid"), qp("offset", sStr())},
		Response:    sObj(map[string]*tools.Schema{"data": sArr(item("gid"))})}

	got, err := json.Marshal(Inspect([]*tools.Tool{paged, single, nil, trap}))
	if err != nil {
		t.Fatal(err)
	}
	want := `[` +
		`{"tool":"GetCustomers","method":"GET","path":"/v1/customers","operationId":"GetCustomers","effect":"read","pagination":` +
		`{"strategy":"cursor","sizeParam":"limit","pageParam":null,"offsetParam":null,"cursorParam":"starting_after",` +
		`"paramsIn":"query","items":"data","continuation":"has_more","provenance":"schema",` +
		`"confidence":"medium","evidence":["starting_after takes the last item's id; has_more says whether to go on"]}},` +
		`{"tool":"get_balance","method":"GET","path":"/v1/balance","operationId":null,"effect":"read","pagination":` +
		`{"strategy":"none","sizeParam":null,"pageParam":null,"offsetParam":null,"cursorParam":null,` +
		`"paramsIn":null,"items":null,"continuation":null,"provenance":"schema",` +
		`"confidence":"high","evidence":["no paging parameter with a continuation"]}},` +
		`{"tool":"getUsersForWorkspace","method":"GET","path":"/workspaces/{workspace_gid}/users","operationId":"getUsersForWorkspace","effect":"read","pagination":` +
		`{"strategy":"none","sizeParam":null,"pageParam":null,"offsetParam":null,"cursorParam":null,` +
		`"paramsIn":null,"items":"data","continuation":null,"provenance":"schema",` +
		`"confidence":"medium","evidence":["offset looks like a cursor, but nothing in the response continues it"]}}` +
		`]`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}

func TestWriteTableSummary(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("METHOD  PATH  TOOL  EFFECT  STRATEGY  CONFIDENCE  PARAMS  ITEMS  CONTINUATION  PROVENANCE  NOTE\n0 operations, 0 paginated; 0 read, 0 write, 0 destructive\n", buf.String()); diff != "" {
		t.Errorf("empty table (-want +got):\n%s", diff)
	}
}

// TestInspectGolden imports testdata/detect/styles.yaml (one operation per
// pagination style) and compares `trawl inspect`'s JSON and table with
// the golden files; -update rewrites them.
func TestInspectGolden(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("testdata", "detect", "styles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tools.ImportOpenAPIData(spec, tools.ImportOptions{ProviderID: "styles"})
	if err != nil {
		t.Fatal(err)
	}
	ins := Inspect(ts)
	js, err := json.MarshalIndent(ins, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, ins); err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct {
		file string
		got  []byte
	}{
		{"styles.inspect.json", append(js, '\n')},
		{"styles.inspect.txt", table.Bytes()},
	} {
		path := filepath.Join("testdata", "detect", g.file)
		if *update {
			if err := os.WriteFile(path, g.got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if diff := cmp.Diff(string(want), string(g.got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", g.file, diff)
		}
	}
	// The table ends with the summary line.
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "13 operations, 10 paginated: ") {
		t.Errorf("summary line = %q", last)
	}
}
