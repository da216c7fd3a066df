package discovery

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	index "github.com/blevesearch/bleve_index_api"
)

// Scoring fewer tools, exactly. Bleve scores every tool that holds any
// word of the query in any field, and a word such as "get" or "list" (the
// thesaurus adds both for "find") is in a fifth of a large pool's tool
// names: most of a search's time goes to tools only such common words
// matched, which seldom rank. So in a large pool a search first scores
// only the tools a rarer word (or the whole name) matched, with bleve's
// own arithmetic — its BM25 formula, query norm and coordination
// factors, its clauses and terms added in the order it adds them (by
// document count) — common words included, their scores read from a
// table kept per common word and field (the index is read-only). And it
// bounds what a tool only common words matched can score: each common
// word's best score in its field, times the coordination factors at their
// largest. When the rerankDepth-th of the tools it scored is above that
// bound, no other tool can be among BM25's best rerankDepth: those are
// the hits a full search returns, with the same scores to the bit
// (TestPrunedSearchIsExact), ties in index order as bleve's collector
// breaks them. A clause of more than ten terms bleve adds in another
// order (a heap): then bleve itself scores the tools at or above the cut
// (the full query restricted to their ids, which changes no score). When
// the bound is not beaten the full search runs.

// commonShare: a word held by more than one tool in commonShare of the
// pool in a field is common there.
const commonShare = 20

// pruneMinPool is the smallest pool searched this way; in a smaller one
// a full search is fast.
const pruneMinPool = 1000

// pruneSlack is how much the bound and the cut are widened against
// rounding: the bound is a sum bleve never computes, and a long clause's
// scores computed here may differ from bleve's in the last digits.
const pruneSlack = 1e-9

// maxCommonTables is how many (word, field) score tables are kept, each
// a float64 per tool; then they are read afresh.
const maxCommonTables = 64

// clauseTerm is one term query of a field clause.
type clauseTerm struct {
	stem  string
	boost float64
}

// fieldClauses are the term queries of each field clause buildQuery
// builds (in fieldBoosts' order): the query's terms, but for those nearly
// every tool holds in that field (everywhere).
func (ix *Index) fieldClauses(terms []queryTerm) [][]clauseTerm {
	out := make([][]clauseTerm, len(fieldBoosts))
	for i, fb := range fieldBoosts {
		for _, t := range terms {
			if ix.everywhere(fb.field, t.stem) {
				continue
			}
			out[i] = append(out[i], clauseTerm{t.stem, fb.boost * t.weight})
		}
	}
	return out
}

// docTable numbers the index's documents: bleve's internal id → position,
// and position → tool.
type docTable struct {
	pos   map[string]int32 // nil when the ids are 0, 1, 2… in order (dense)
	tools []int32          // position → index in Index.tools
}

// posOf is the position of bleve's internal id.
func (d *docTable) posOf(id index.IndexInternalID) (int32, bool) {
	if d.pos == nil {
		if len(id) != 8 {
			return 0, false
		}
		n := binary.BigEndian.Uint64(id)
		return int32(n), n < uint64(len(d.tools))
	}
	p, ok := d.pos[string(id)]
	return p, ok
}

// scoreTable is a (word, field)'s BM25 term score per document position
// (0: not there), and its highest.
type scoreTable struct {
	score []float64
	best  float64
}

// pruneState is what pruning reads from the index once.
type pruneState struct {
	once    sync.Once
	docs    *docTable // nil: pruning is off
	avgLen  map[string]float64
	mu      sync.Mutex
	commons map[fieldTerm]*scoreTable
}

// prunedTop is BM25's best rerankDepth hits for a query of clauses (and
// the whole-name key), found as this file's comment says; ok is false
// when the bound was not beaten (or pruning does not apply), and the full
// query must run.
func (ix *Index) prunedTop(full query.Query, clauses [][]clauseTerm, key, kit string) (best []scoredTool, ok bool, err error) {
	n := len(ix.tools)
	if n < pruneMinPool || ix.noPrune {
		return nil, false, nil
	}
	st := &ix.prune
	st.once.Do(func() { ix.initPrune() })
	if st.docs == nil {
		return nil, false, nil
	}
	adv, err := ix.bleve.Advanced()
	if err != nil {
		return nil, false, nil
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, false, nil
	}
	defer r.Close()

	p := ix.prunePlan(r, clauses, key)
	if p == nil {
		return nil, false, nil
	}
	ts, top, bound := p.ts, p.top, p.bound

	// Score every tool a rare term matched, in position order, as bleve
	// would: per clause the sum of its terms' scores times the share of
	// its terms matched, and the clauses' sum times the share of clauses
	// matched.
	type scored struct {
		pos   int32
		score float64
	}
	var cands []scored
	for {
		next := int32(math.MaxInt32)
		for i := range ts {
			for j := range ts[i] {
				if x := &ts[i][j]; x.at < len(x.list) && x.list[x.at].pos < next {
					next = x.list[x.at].pos
				}
			}
		}
		if next == math.MaxInt32 {
			break
		}
		var sum float64
		matched := 0
		for i := range ts {
			var cs float64
			m := 0
			for j := range ts[i] {
				x := &ts[i][j]
				switch {
				case x.common != nil:
					if d := x.common.score[next]; d > 0 {
						cs += termScore(d, x.qw)
						m++
					}
				case x.at < len(x.list) && x.list[x.at].pos == next:
					cs += termScore(x.list[x.at].score, x.qw)
					x.at++
					m++
				}
			}
			if m > 0 {
				matched++
				if p.field[i] {
					cs *= float64(m) / float64(len(ts[i]))
				}
				sum += cs
			}
		}
		if kit != "" && !ix.inKit(int(st.docs.tools[next]), kit) {
			continue
		}
		cands = append(cands, scored{next, sum * (float64(matched) / float64(top))})
	}
	if len(cands) < rerankDepth {
		return nil, false, nil
	}
	// Best first, equal scores in index order, as bleve's collector
	// keeps them.
	slices.SortFunc(cands, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return int(a.pos - b.pos)
	})
	cut := cands[rerankDepth-1].score * (1 - pruneSlack)
	if !(cut > bound) {
		return nil, false, nil
	}
	if p.exact {
		// Bleve's sums, in its order: its scores.
		for _, c := range cands[:rerankDepth] {
			best = append(best, scoredTool{ix.tools[st.docs.tools[c.pos]], c.score})
		}
		return best, true, nil
	}
	// A clause of many terms is summed by bleve in another order: bleve
	// scores the tools at or above the cut (the last digits may differ),
	// among which are BM25's best.
	var ids []string
	for _, c := range cands {
		if c.score < cut {
			break
		}
		ids = append(ids, ix.tools[st.docs.tools[c.pos]].ID)
	}
	only := bleve.NewDocIDQuery(ids)
	only.SetBoost(0) // restricts; adds nothing to the score or the query norm
	res, err := ix.top(bleve.NewConjunctionQuery(full, only), kit)
	if err != nil {
		return nil, false, err
	}
	for _, h := range res.Hits {
		if t, ok := ix.byID[h.ID]; ok {
			best = append(best, scoredTool{t, h.Score})
		}
	}
	return best, true, nil
}

// pruneTerm is one term query of a pruned search.
type pruneTerm struct {
	field  string
	qw     float64     // boost × idf × norm
	common *scoreTable // nil: rare
	list   []posting   // a rare term's postings
	at     int         // merge cursor in list
	idf    float64
	boost  float64
	stem   string
	df     int
}

// prunePlan is a query's clauses as bleve orders them, the rare terms'
// postings read, and the bound.
type prunePlan struct {
	ts    [][]pruneTerm // per clause, its terms
	field []bool        // per clause: a field's disjunction (else the exact name's term)
	top   int           // the top-level clauses
	bound float64       // the most a tool no rare term matched scores
	exact bool          // the scores computed are bleve's to the bit (no clause is summed by a heap)
}

// prunePlan reads what a pruned search of clauses and key needs through
// r; nil when pruning does not apply (no common word, or none rare).
func (ix *Index) prunePlan(r index.IndexReader, clauses [][]clauseTerm, key string) *prunePlan {
	n := len(ix.tools)
	st := &ix.prune
	var err error
	// Every term query's weight and bleve's query norm: one over the root
	// of the sum of their squares, in the order bleve adds them.
	idf := func(field string, df int) float64 {
		if st.avgLen[field] == 0 {
			// A field no tool has words in: bleve scores it with TF-IDF.
			return 1.0 + math.Log(float64(n)/float64(uint64(df)+1))
		}
		return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
	}
	// The clauses, each a disjunction of term queries but the exact
	// name's, one term query. Bleve orders a disjunction's children by
	// their document counts (a clause's: its terms' sum), and adds
	// weights and scores in that order.
	type clause struct {
		terms []pruneTerm
		field bool // a field's disjunction (else the exact name's term)
		count int
	}
	var cls []clause
	rare, common := 0, 0
	for i, c := range clauses {
		field := fieldBoosts[i].field
		cl := clause{field: true}
		for _, t := range c {
			df := ix.docFreq(field, t.stem)
			cl.terms = append(cl.terms, pruneTerm{field: field, idf: idf(field, df), boost: t.boost, stem: t.stem, df: df})
			cl.count += df
			switch {
			case df == 0:
			case df*commonShare > n:
				common++
			default:
				rare++
			}
		}
		slices.SortStableFunc(cl.terms, func(a, b pruneTerm) int { return a.df - b.df })
		cls = append(cls, cl)
	}
	if key != "" {
		df := ix.docFreq(fieldExact, key)
		cls = append(cls, clause{terms: []pruneTerm{{field: fieldExact, idf: idf(fieldExact, df), boost: exactBoost, stem: key, df: df}}, count: df})
		if df > 0 {
			rare++
		}
	}
	slices.SortStableFunc(cls, func(a, b clause) int { return a.count - b.count })
	if common == 0 || rare == 0 || len(cls) > searcher.DisjunctionHeapTakeover {
		return nil
	}
	// A clause of more terms is summed by a heap, in another order.
	exact := true
	var squares float64
	for _, cl := range cls {
		exact = exact && len(cl.terms) <= searcher.DisjunctionHeapTakeover
		var sum float64
		for _, x := range cl.terms {
			w := x.boost * x.idf
			sum += w * w
		}
		squares += sum
	}
	if squares == 0 {
		return nil
	}
	ts := make([][]pruneTerm, len(cls))
	for i, cl := range cls {
		ts[i] = cl.terms
	}
	norm := 1.0 / math.Sqrt(squares)
	for i := range ts {
		for j := range ts[i] {
			x := &ts[i][j]
			x.qw = x.boost * x.idf * norm
			if x.df == 0 {
				continue
			}
			if x.field != fieldExact && x.df*commonShare > n {
				if x.common = st.commonTable(ix, r, x.field, x.stem, x.idf); x.common == nil {
					return nil
				}
				continue
			}
			if x.list, err = st.postings(r, x.field, x.stem, x.idf); err != nil {
				return nil
			}
		}
	}

	// The most a tool no rare word matched scores: the common terms of
	// each field clause that has some, at their best.
	top := len(ts)
	fields := 0
	var bound float64
	for _, cl := range ts {
		var s float64
		m := 0
		for _, x := range cl {
			if x.common != nil {
				s += termScore(x.common.best, x.qw)
				m++
			}
		}
		if m > 0 {
			fields++
			bound += s * (float64(m) / float64(len(cl)))
		}
	}
	bound *= float64(fields) / float64(top)
	bound *= 1 + pruneSlack
	p := &prunePlan{ts: ts, top: top, bound: bound, exact: exact}
	for _, cl := range cls {
		p.field = append(p.field, cl.field)
	}
	return p
}

// termScore is a term query's score for a document: its BM25 score
// times the query's weight, as bleve multiplies it.
func termScore(doc, qw float64) float64 {
	if qw != 1.0 {
		return doc * qw
	}
	return doc
}

// inKit reports whether tool i is in the toolkit the filter kit names (a
// lowercased toolkit id), as the kit field holds it.
func (ix *Index) inKit(i int, kit string) bool {
	t := ix.tools[i]
	return strings.ToLower(toolkitOf(t)) == kit || t.ToolkitName != "" && strings.ToLower(t.ToolkitName) == kit
}

// errUnknownDoc: the index holds a document pruning did not number.
var errUnknownDoc = errors.New("discovery: a document pruning did not number")

// posting is a document's BM25 score for one term in one field.
type posting struct {
	pos   int32
	score float64
}

// initPrune numbers the documents and reads each field's average length
// as bleve's BM25 reads it; pruning stays off when any of it fails.
func (ix *Index) initPrune() {
	st := &ix.prune
	adv, err := ix.bleve.Advanced()
	if err != nil {
		return
	}
	r, err := adv.Reader()
	if err != nil {
		return
	}
	defer r.Close()
	bm, ok := r.(index.BM25Reader)
	if !ok {
		return
	}
	count, err := r.DocCount()
	if err != nil || int(count) != len(ix.tools) {
		return
	}
	st.avgLen = map[string]float64{}
	for _, fb := range append(slices.Clone(fieldBoosts), struct {
		field string
		boost float64
	}{fieldExact, exactBoost}) {
		card, err := bm.FieldCardinality(fb.field)
		if err != nil {
			return
		}
		st.avgLen[fb.field] = math.Ceil(float64(card) / float64(count))
	}
	byID := make(map[string]int32, len(ix.tools))
	for i, t := range ix.tools {
		byID[t.ID] = int32(i)
	}
	dr, err := r.DocIDReaderAll()
	if err != nil {
		return
	}
	defer dr.Close()
	d := &docTable{pos: make(map[string]int32, len(ix.tools))}
	dense := true
	for {
		id, err := dr.Next()
		if err != nil {
			return
		}
		if id == nil {
			break
		}
		ext, err := r.ExternalID(id)
		if err != nil {
			return
		}
		i, ok := byID[ext]
		if !ok {
			return
		}
		dense = dense && len(id) == 8 && binary.BigEndian.Uint64(id) == uint64(len(d.tools))
		d.pos[string(id)] = int32(len(d.tools))
		d.tools = append(d.tools, i)
	}
	if len(d.tools) != len(ix.tools) {
		return
	}
	if dense {
		d.pos = nil
	}
	st.docs = d
}

// postings reads stem's postings in field, each with its BM25 score (as
// bleve's term scorer computes it), in position order.
func (st *pruneState) postings(r index.IndexReader, field, stem string, idf float64) ([]posting, error) {
	tfr, err := r.TermFieldReader(context.Background(), []byte(stem), field, true, true, false)
	if err != nil {
		return nil, err
	}
	defer tfr.Close()
	avg := st.avgLen[field]
	out := make([]posting, 0, tfr.Count())
	var pre index.TermFieldDoc
	for {
		d, err := tfr.Next(&pre)
		if err != nil {
			return nil, err
		}
		if d == nil {
			break
		}
		p, ok := st.docs.posOf(d.ID)
		if !ok {
			return nil, errUnknownDoc
		}
		out = append(out, posting{p, bm25(idf, d.Freq, d.Norm, avg)})
	}
	if !slices.IsSortedFunc(out, func(a, b posting) int { return int(a.pos - b.pos) }) {
		return nil, errUnknownDoc
	}
	return out, nil
}

// commonTable is the score table of a common word in field, read once
// and kept; nil when it cannot be read.
func (st *pruneState) commonTable(ix *Index, r index.IndexReader, field, stem string, idf float64) *scoreTable {
	k := fieldTerm{field, stem}
	st.mu.Lock()
	t, ok := st.commons[k]
	st.mu.Unlock()
	if ok {
		return t
	}
	ps, err := st.postings(r, field, stem, idf)
	if err != nil {
		return nil
	}
	t = &scoreTable{score: make([]float64, len(ix.tools))}
	for _, p := range ps {
		t.score[p.pos] = p.score
		t.best = max(t.best, p.score)
	}
	st.mu.Lock()
	if st.commons == nil || len(st.commons) >= maxCommonTables {
		st.commons = map[fieldTerm]*scoreTable{}
	}
	st.commons[k] = t
	st.mu.Unlock()
	return t
}

// bm25 is bleve's BM25 score of a term freq times in a field whose norm
// is norm (one over the root of its length), before the query's weight.
func bm25(idf float64, freq uint64, norm, avgLen float64) float64 {
	tf := math.Sqrt(float64(freq)) // bleve's cache of small roots holds the same
	fieldLength := 1 / (norm * norm)
	return idf * (tf * search.BM25_k1) /
		(tf + search.BM25_k1*(1-search.BM25_b+(search.BM25_b*fieldLength/avgLen)))
}
