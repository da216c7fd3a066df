package loop

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDatasetBinaryRoundTrip(t *testing.T) {
	for _, d := range []*Dataset{
		{},
		{Envelope: []byte(`{"data":[]}`), ItemsPath: "data", HasItems: true, Items: [][]byte{[]byte(`1`), []byte(`{"a":"é"}`)}, Stats: []byte(`{}`), Complete: true},
		{Items: [][]byte{[]byte(`[]`)}},
	} {
		b, err := d.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Dataset
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(d, &got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func FuzzDatasetUnmarshalBinary(f *testing.F) {
	d := &Dataset{Envelope: []byte(`{"data":[]}`), ItemsPath: "data", HasItems: true, Items: [][]byte{[]byte(`1`)}, Complete: true}
	b, _ := d.MarshalBinary()
	f.Add(b)
	f.Add(datasetMagic)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Dataset
		if d.UnmarshalBinary(data) != nil {
			return
		}
		again, _ := d.MarshalBinary()
		var back Dataset
		if err := back.UnmarshalBinary(again); err != nil {
			t.Fatalf("re-encoded dataset does not decode: %v", err)
		}
	})
}
