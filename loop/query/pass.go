package query

import "fmt"

// A Pass filters and projects each row the moment a checking pass has
// found it (Pass.AppendElementsAt), while the row's bytes are still in the
// CPU's cache, and keeps what it made of the row in a Page. RunPages then
// answers exactly what Run answers for the rows, using the pages' work
// for the rows it finds there instead of reading those rows again from
// memory: Run over rows gathered from many pages reads every row a second
// time, long after the check evicted it. A Pass is immutable and safe for
// concurrent use; each page's work is its own.
type Pass struct {
	fields *Fields
	filter *Filter
}

// maxPassPaths bounds the projection paths a Pass handles: which paths a
// row matched is kept as one bit a path.
const maxPassPaths = 64

// NewPass returns the pass for a projection and a filter (either may be
// nil), or nil when there is nothing to do ahead (neither, or a
// projection of more than 64 paths); a nil Pass checks rows and does
// nothing more.
func NewPass(fields *Fields, filter *Filter) *Pass {
	if filter != nil && len(filter.clauses) == 0 {
		filter = nil
	}
	if fields == nil && filter == nil || fields != nil && len(fields.paths) > maxPassPaths {
		return nil
	}
	return &Pass{fields: fields, filter: filter}
}

// Page is what a Pass made of the rows of one page: for each row, in the
// order checked, whether it passed the filter, its projection and the
// projection paths it matched.
type Page struct {
	pass *Pass
	rows [][]byte
	out  []byte    // the projections, one after the other
	res  []rowWork // one per row
	// passed counts the rows that passed the filter (all without one).
	passed int
}

// rowWork is a Pass's work on one row: lo is -1 when the row did not pass
// the filter, -2 when it was not projected (RunPages does it again), else
// the row's projection is out[lo:hi] (both 0 without a projection).
type rowWork struct {
	lo, hi  int
	matched uint64 // bit i: the projection's path i matched
}

// AppendElementsAt is AppendElementsAt, with each element filtered and
// projected right after it is checked. The page holds that work (nil for
// a nil Pass, or when the array could not be read).
func (p *Pass) AppendElementsAt(dst [][]byte, doc []byte, path string) ([][]byte, *Page, error) {
	pg := p.newPage()
	dst, err := appendElementsAt(dst, doc, path, pg)
	if err != nil {
		return dst, nil, err
	}
	return dst, pg, nil
}

// AppendElements is AppendElements with each element filtered and
// projected right after it is checked, as AppendElementsAt.
func (p *Pass) AppendElements(dst [][]byte, arr []byte) ([][]byte, *Page, error) {
	pg := p.newPage()
	dst, err := appendElements(dst, arr, pg)
	if err != nil {
		return dst, nil, err
	}
	return dst, pg, nil
}

func (p *Pass) newPage() *Page {
	if p == nil {
		return nil
	}
	return &Page{pass: p}
}

// add does the pass's work on one row just checked; left is how many
// bytes of the page follow it (to size the page's slices once).
func (pg *Page) add(row []byte, left int) {
	p := pg.pass
	if pg.rows == nil {
		n := min(left/(len(row)+1)+1, 1<<16)
		pg.rows, pg.res = make([][]byte, 0, n), make([]rowWork, 0, n)
	}
	pg.rows = append(pg.rows, row)
	if p.filter != nil && !p.filter.Match(row) {
		pg.res = append(pg.res, rowWork{lo: -1})
		return
	}
	pg.passed++
	if p.fields == nil {
		pg.res = append(pg.res, rowWork{})
		return
	}
	var flags [maxPassPaths]bool
	matched := flags[:len(p.fields.paths)]
	if pg.out == nil {
		// Projections are small: one buffer of a few kilobytes holds a
		// page's in the common case, without the first doublings.
		pg.out = make([]byte, 0, projectionBuffer)
	}
	lo := len(pg.out)
	out, err := p.fields.project(row, pg.out, matched, true)
	if err != nil {
		pg.res = append(pg.res, rowWork{lo: -2})
		return
	}
	pg.out = out
	var bits uint64
	for i, ok := range matched {
		if ok {
			bits |= 1 << i
		}
	}
	pg.res = append(pg.res, rowWork{lo: lo, hi: len(out), matched: bits})
}

// projectionBuffer is the first size of a page's projection buffer.
const projectionBuffer = 4 << 10

// sameRow reports whether a and b are the very same bytes in memory (not
// only equal ones): a row's work applies to the row it was done on.
func sameRow(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// pageCursor finds rows in pages, in order: rows handed to RunPages are
// normally the pages' rows in the order checked, some dropped (duplicates,
// a page read again). A row not found costs a search to the end of the
// pages; after maxMisses of them the search is given up, so the cost
// stays linear whatever rows are asked.
type pageCursor struct {
	pages  []*Page
	p, i   int
	misses int
}

const maxMisses = 32

func (c *pageCursor) find(row []byte) (*Page, *rowWork) {
	if c.misses > maxMisses {
		return nil, nil
	}
	for p, i := c.p, c.i; p < len(c.pages); p, i = p+1, 0 {
		pg := c.pages[p]
		for ; i < len(pg.rows); i++ {
			if sameRow(pg.rows[i], row) {
				c.p, c.i = p, i+1
				return pg, &pg.res[i]
			}
		}
	}
	c.misses++
	return nil, nil
}

// RunPages is Run(rows, fields, filter), using the work of pages that a
// Pass of the same fields and filter did on these very rows (the same
// bytes in memory, unchanged since). Rows not found in pages, and pages
// of another Pass, are worked as Run works them: the answer is Run's
// whatever pages are given, only the cost differs. Projected rows found
// in pages are sub-slices of the pages' buffers.
func RunPages(rows [][]byte, fields *Fields, filter *Filter, pages []*Page) ([][]byte, Stats, error) {
	st := Stats{Rows: len(rows)}
	useFilter := filter != nil && len(filter.clauses) > 0
	if !useFilter {
		filter = nil
	}
	var usable []*Page
	guess := 0 // the rows kept, when they are the pages' rows
	for _, pg := range pages {
		if pg != nil && pg.pass.fields == fields && pg.pass.filter == filter {
			usable = append(usable, pg)
			guess += pg.passed
		}
	}
	// Room for the kept rows the pages' work foretells; rows of no
	// page, if any, grow it.
	guess = min(guess+16, len(rows))
	if len(usable) == 0 {
		return Run(rows, fields, filter)
	}
	cur := pageCursor{pages: usable}
	if fields == nil {
		if !useFilter {
			return rows, st, nil
		}
		kept := make([][]byte, 0, guess)
		for _, r := range rows {
			if _, w := cur.find(r); w != nil && w.lo != -2 {
				if w.lo >= 0 {
					kept = append(kept, r)
				}
			} else if filter.Match(r) {
				kept = append(kept, r)
			}
		}
		st.Kept = len(kept)
		return kept, st, nil
	}
	// The kept rows, each with its projection when a page has it.
	type keptRow struct {
		row  []byte
		done []byte // the page's projection; nil: to project here
	}
	kept := make([]keptRow, 0, guess)
	var bits uint64
	left := 0 // bytes of the kept rows to project here
	for _, r := range rows {
		if pg, w := cur.find(r); w != nil && w.lo != -2 {
			if w.lo >= 0 {
				kept = append(kept, keptRow{r, pg.out[w.lo:w.hi:w.hi]})
				bits |= w.matched
			}
			continue
		}
		if useFilter && !filter.Match(r) {
			continue
		}
		kept = append(kept, keptRow{row: r})
		left += len(r)
	}
	st.Kept = len(kept)
	matched := make([]bool, len(fields.paths))
	for i := range matched {
		matched[i] = bits&(1<<i) != 0
	}
	out := make([][]byte, len(kept))
	if left > 0 {
		buf := make([]byte, 0, left/4+64)
		ends := make([]int, len(kept))
		var err error
		for i, k := range kept {
			if k.done == nil {
				if buf, err = fields.Project(k.row, buf, matched); err != nil {
					return nil, st, fmt.Errorf("query: projecting row %d: %w", i, err)
				}
			}
			ends[i] = len(buf)
		}
		start := 0
		for i, e := range ends {
			if kept[i].done == nil {
				out[i] = buf[start:e:e]
			}
			start = e
		}
	}
	for i, k := range kept {
		if k.done != nil {
			out[i] = k.done
		}
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
