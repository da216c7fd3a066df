package loop

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// datasetMagic begins a serialised Dataset (version 1).
var datasetMagic = []byte("trawl.dataset.1\n")

// MarshalBinary serialises the dataset, for a DatasetStore outside the
// process: length-prefixed fields, the items as they are (no re-encoding).
func (d *Dataset) MarshalBinary() ([]byte, error) {
	out := make([]byte, 0, d.Size()+int64(len(datasetMagic)))
	out = append(out, datasetMagic...)
	flags := byte(0)
	if d.HasItems {
		flags |= 1
	}
	if d.Complete {
		flags |= 2
	}
	out = append(out, flags)
	for _, f := range [][]byte{d.Envelope, []byte(d.ItemsPath), d.Stats} {
		out = binary.AppendUvarint(out, uint64(len(f)))
		out = append(out, f...)
	}
	out = binary.AppendUvarint(out, uint64(len(d.Items)))
	for _, it := range d.Items {
		out = binary.AppendUvarint(out, uint64(len(it)))
		out = append(out, it...)
	}
	return out, nil
}

// UnmarshalBinary restores a dataset serialised by MarshalBinary. Corrupt
// input is an error, never a panic. The dataset's fields share data.
func (d *Dataset) UnmarshalBinary(data []byte) error {
	bad := func(what string) error { return fmt.Errorf("dataset: corrupt record: %s", what) }
	if !bytes.HasPrefix(data, datasetMagic) {
		return bad("not a dataset")
	}
	p := data[len(datasetMagic):]
	if len(p) < 1 || p[0] > 3 {
		return bad("flags")
	}
	out := Dataset{HasItems: p[0]&1 != 0, Complete: p[0]&2 != 0}
	p = p[1:]
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return nil, false
		}
		f := p[k : k+int(n) : k+int(n)]
		p = p[k+int(n):]
		return f, true
	}
	var ok bool
	var path []byte
	if out.Envelope, ok = field(); !ok {
		return bad("envelope")
	}
	if path, ok = field(); !ok {
		return bad("items path")
	}
	out.ItemsPath = string(path)
	if out.Stats, ok = field(); !ok {
		return bad("stats")
	}
	if len(out.Envelope) == 0 {
		out.Envelope = nil
	}
	if len(out.Stats) == 0 {
		out.Stats = nil
	}
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) { // each item takes at least a byte
		return bad("item count")
	}
	p = p[k:]
	if n > 0 {
		out.Items = make([][]byte, n)
	}
	for i := range out.Items {
		if out.Items[i], ok = field(); !ok {
			return bad("item")
		}
	}
	if len(p) != 0 {
		return bad("trailing bytes")
	}
	*d = out
	return nil
}
