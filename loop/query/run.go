package query

import "fmt"

// Stats says what Run did.
type Stats struct {
	Rows int // rows given
	Kept int // rows that passed the filter (all of them without a filter)
	// Unmatched lists, in path order, the projection paths that matched
	// no kept row — what `_unmatchedFields` reports. It is nil without a
	// projection or when no row was kept (nothing to judge them by).
	Unmatched []string
}

// Run filters rows, then projects the rows that pass: the filter sees the
// full rows, so it may name fields the projection drops. Either step may
// be nil. Projected rows are sub-slices of one new buffer; without a
// projection the kept rows are the input slices themselves. An error
// names the row that could not be projected (rows split by Elements have
// been checked and cannot fail).
func Run(rows [][]byte, fields *Fields, filter *Filter) ([][]byte, Stats, error) {
	st := Stats{Rows: len(rows)}
	kept := rows
	if filter != nil && len(filter.clauses) > 0 {
		kept = make([][]byte, 0, len(rows))
		for _, r := range rows {
			if filter.Match(r) {
				kept = append(kept, r)
			}
		}
	}
	st.Kept = len(kept)
	if fields == nil {
		return kept, st, nil
	}
	matched := make([]bool, len(fields.paths))
	ends := make([]int, len(kept))
	// Projections are a fraction of their rows; start from a modest
	// guess and let append grow it.
	size := 0
	for _, r := range kept {
		size += len(r)
	}
	buf := make([]byte, 0, size/4+64)
	var err error
	for i, r := range kept {
		if buf, err = fields.Project(r, buf, matched); err != nil {
			return nil, st, fmt.Errorf("query: projecting row %d: %w", i, err)
		}
		ends[i] = len(buf)
	}
	out := make([][]byte, len(kept))
	start := 0
	for i, e := range ends {
		out[i] = buf[start:e:e]
		start = e
	}
	if len(kept) > 0 {
		for i, ok := range matched {
			if !ok {
				st.Unmatched = append(st.Unmatched, fields.paths[i])
			}
		}
	}
	return out, st, nil
}

// AppendArray appends the JSON array of items to dst.
func AppendArray(dst []byte, items [][]byte) []byte {
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, it...)
	}
	return append(dst, ']')
}
