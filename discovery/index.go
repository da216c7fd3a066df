package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/trawl-dev/trawl/tools"
)

// Index is a full-text index over pooled tools, ranked with BM25. It is
// immutable once built and safe for concurrent use; when the pooled
// toolkits change, build a new Index and Close the old one.
type Index struct {
	bleve    bleve.Index
	stemmed  analysis.Analyzer // the English analyzer the text fields use
	plain    analysis.Analyzer // lowercase words without stop words, unstemmed
	tools    []*tools.Tool     // as given
	byID     map[string]*tools.Tool
	facts    map[string]toolFacts // by tool id
	byName   map[string]*tools.Tool
	toolkits map[string]string // lowercased toolkit id or name → toolkit id
	kitIDs   []string          // sorted toolkit ids, for error messages
	synonyms bool              // expand queries with the thesaurus (tests turn it off to compare)
	noPrune  bool              // always search in full (tests compare, see prune.go)
	sem      *semanticIndex    // nil: BM25 alone
	kits     *kitStats

	dfMu  sync.Mutex
	df    map[fieldTerm]int // a term's document count in a field, as looked up
	prune pruneState        // see prune.go
	// prunedRuns counts the searches answered by scoring the tools a rare
	// word matched (prune.go).
	prunedRuns atomic.Int64
}

// fieldTerm is a stem in one field.
type fieldTerm struct{ field, stem string }

// Hit is one search result.
type Hit struct {
	Tool  *tools.Tool
	Score float64
	// Why says in one short line why the tool matched: the query's words
	// found in its name, description, parameters…, the action it shares
	// with the query, "close in meaning" from semantic ranking.
	Why string
}

// Default and maximum number of results of search_tools.
const (
	DefaultSearchLimit = 5
	MaxSearchLimit     = 10
)

// ErrUnknownToolkit is returned by Search for a toolkit filter that names
// no toolkit of the index.
var ErrUnknownToolkit = errors.New("unknown toolkit")

// Index fields.
const (
	fieldName        = "name"
	fieldDescription = "description"
	fieldParams      = "params"
	fieldToolkit     = "toolkit"  // the toolkit's description
	fieldKitName     = "kit_name" // the toolkit's id and display name
	fieldKit         = "kit"      // keyword: lowercased toolkit id and name, for the filter
	fieldExact       = "exact"    // keyword: the name as exactKey spells it, with and without its toolkit prefix
	// Unstemmed words, for the typo fallback only: a typo often changes
	// the stem ("vacaton" stays "vacaton", two edits from "vacat", the
	// stem of "vacation"), so edits are counted on whole words.
	fieldNameWords = "name_words"
	fieldWords     = "words" // description, parameter names, toolkit name

	// exactBoost weighs a query that spells a whole tool name.
	exactBoost = 5

	analyzerPlain = "discovery_plain"

	// maxQueryWords is how many distinct words of a query are searched;
	// later ones are ignored, so a pasted page cannot make a search slow.
	// Thesaurus words come on top, at most as many again.
	maxQueryWords = 32
)

// actionBoost is how much more a tool scores whose action is the one
// the query asks for (times the action's weight, see queryActions).
var actionBoost = 0.5

// rerankDepth is how many of BM25's best hits are ranked again with the
// action and the tie-break.
const rerankDepth = 20

// fuzzyBoosts are the fields the typo fallback searches.
var fuzzyBoosts = []struct {
	field string
	boost float64
}{
	{fieldNameWords, 3},
	{fieldWords, 1},
}

// fieldBoosts are the fields a query searches and how much a match in
// each weighs. A tool's name says what it does most densely, its
// description next; the parameters and the toolkit text help tell close
// tools apart. The values come from a coarse grid over the labelled
// queries of testdata/queries.json, rounded: neighbouring values rank
// within one query of each other.
var fieldBoosts = []struct {
	field string
	boost float64
}{
	{fieldName, 3},
	{fieldDescription, 1},
	{fieldParams, 0.3},
	{fieldToolkit, 0.3},
	{fieldKitName, 1},
}

// NewIndex indexes ts in memory: each tool's name (split into words, its
// toolkit prefix dropped), description, toolkit id, name and description,
// and its parameters' names and descriptions, with English stemming.
// Tool ids and names must be unique.
func NewIndex(ts []*tools.Tool) (*Index, error) { return NewIndexWith(ts, IndexOptions{}) }

// NewIndexWith is NewIndex with options. With semantic ranking, the
// tools' texts the cache does not hold are embedded in the background:
// until that is done, and after it failed (which is logged), the index
// searches with BM25 alone; a search after Semantic.RetryAfter tries
// again. SemanticReady waits for it.
func NewIndexWith(ts []*tools.Tool, opt IndexOptions) (*Index, error) {
	im, err := newMapping()
	if err != nil {
		return nil, fmt.Errorf("discovery: index mapping: %w", err)
	}
	ix := &Index{
		stemmed:  im.AnalyzerNamed(en.AnalyzerName),
		plain:    im.AnalyzerNamed(analyzerPlain),
		tools:    slices.Clone(ts),
		byID:     make(map[string]*tools.Tool, len(ts)),
		facts:    make(map[string]toolFacts, len(ts)),
		byName:   make(map[string]*tools.Tool, len(ts)),
		toolkits: map[string]string{},
		synonyms: true,
	}
	if ix.stemmed == nil || ix.plain == nil {
		return nil, errors.New("discovery: analyzers not registered")
	}
	kitDesc := map[string]string{}
	for i, t := range ts {
		if t == nil {
			return nil, fmt.Errorf("discovery: tool %d is nil", i)
		}
		if _, dup := ix.byID[t.ID]; dup {
			return nil, fmt.Errorf("discovery: tool id %q is indexed twice", t.ID)
		}
		if other, dup := ix.byName[t.Name]; dup {
			return nil, fmt.Errorf("discovery: tools %q and %q share the name %q", other.ID, t.ID, t.Name)
		}
		ix.byID[t.ID] = t
		f := factsOf(t)
		if prev, ok := kitDesc[f.kitDescText]; ok {
			f.kitDescText = prev // one copy per toolkit
		} else {
			kitDesc[f.kitDescText] = f.kitDescText
		}
		ix.facts[t.ID] = f
		ix.byName[t.Name] = t
		kit := toolkitOf(t)
		if _, seen := ix.toolkits[strings.ToLower(kit)]; !seen {
			ix.kitIDs = append(ix.kitIDs, kit)
		}
		ix.toolkits[strings.ToLower(kit)] = kit
		if t.ToolkitName != "" {
			ix.toolkits[strings.ToLower(t.ToolkitName)] = kit
		}
	}
	slices.Sort(ix.kitIDs)
	ix.kits = newKitStats(ts, ix.stemmed)

	// An in-memory scorch index: NewMemOnly builds an upsidedown index,
	// which cannot give BM25 its field statistics and silently scores
	// with TF-IDF instead.
	b, err := bleve.NewUsing("", im, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("discovery: creating index: %w", err)
	}
	batch := b.NewBatch()
	for _, t := range ts {
		if err := batch.Index(t.ID, document(t)); err != nil {
			b.Close()
			return nil, fmt.Errorf("discovery: indexing %s: %w", t.ID, err)
		}
	}
	if err := b.Batch(batch); err != nil {
		b.Close()
		return nil, fmt.Errorf("discovery: indexing: %w", err)
	}
	ix.bleve = b
	if sc := opt.Semantic; sc != nil {
		if sc.Embedder == nil {
			b.Close()
			return nil, errors.New("discovery: semantic ranking needs an Embedder")
		}
		ix.sem = newSemanticIndex(*sc, ix.tools)
		ix.sem.mu.Lock()
		ix.sem.startLocked()
		ix.sem.mu.Unlock()
	}
	return ix, nil
}

// SemanticReady waits for the embedding of the tools under way, if any,
// or until ctx ends, and returns the last embedding's error (nil too for
// an index without semantic ranking).
func (ix *Index) SemanticReady(ctx context.Context) error {
	if ix.sem == nil {
		return nil
	}
	return ix.sem.wait(ctx)
}

func newMapping() (*mapping.IndexMappingImpl, error) {
	im := bleve.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = en.AnalyzerName
	im.IndexDynamic = false
	im.StoreDynamic = false
	im.DocValuesDynamic = false
	err := im.AddCustomAnalyzer(analyzerPlain, map[string]any{
		"type":          custom.Name,
		"tokenizer":     unicode.Name,
		"token_filters": []any{lowercase.Name, en.StopName},
	})
	if err != nil {
		return nil, err
	}
	doc := bleve.NewDocumentStaticMapping()
	text := func(analyzer string) *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = analyzer
		f.Store = false
		f.IncludeInAll = false
		f.IncludeTermVectors = false
		f.DocValues = false
		return f
	}
	for _, fb := range fieldBoosts {
		doc.AddFieldMappingsAt(fb.field, text(en.AnalyzerName))
	}
	doc.AddFieldMappingsAt(fieldKit, text(keyword.Name))
	doc.AddFieldMappingsAt(fieldExact, text(keyword.Name))
	doc.AddFieldMappingsAt(fieldNameWords, text(analyzerPlain))
	doc.AddFieldMappingsAt(fieldWords, text(analyzerPlain))
	// No "_all" composite field: every query names its fields, and
	// building it costs a third of the indexing time.
	doc.AddSubDocumentMapping("_all", bleve.NewDocumentDisabledMapping())
	im.DefaultMapping = doc
	return im, nil
}

// toolkitOf is the toolkit a tool is searched under.
func toolkitOf(t *tools.Tool) string { return cmp.Or(t.Toolkit, t.Provider) }

// document is what the index holds of a tool.
func document(t *tools.Tool) map[string]any {
	var params, paramNames strings.Builder
	for _, p := range t.Params {
		paramNames.WriteString(splitIdentifiers(p.Name))
		paramNames.WriteString("\n")
		params.WriteString(splitIdentifiers(p.Name))
		params.WriteString(". ")
		params.WriteString(p.Description)
		params.WriteString("\n")
	}
	kit := toolkitOf(t)
	kits := []string{strings.ToLower(kit)}
	if t.ToolkitName != "" {
		kits = append(kits, strings.ToLower(t.ToolkitName))
	}
	short := nameWords(t.Name, kit, t.ToolkitName, t.Provider)
	actions, _ := actionOf(t, short)
	name := short
	if len(actions) > 1 { // the name's verb is not the canonical one: index both
		name = actions[0] + " " + short
	}
	return map[string]any{
		fieldExact:       uniqueStrings(exactKey(t.Name), exactKey(short)),
		fieldName:        name,
		fieldDescription: t.Description,
		fieldParams:      params.String(),
		fieldToolkit:     t.ToolkitDescription,
		fieldKitName:     splitIdentifiers(kit) + "\n" + t.ToolkitName,
		fieldKit:         kits,
		fieldNameWords:   short,
		fieldWords:       strings.Join([]string{t.Description, paramNames.String(), t.ToolkitName}, "\n"),
	}
}

// Len is the number of tools indexed.
func (ix *Index) Len() int { return len(ix.tools) }

// Tools are the indexed tools, in the order given to NewIndex.
func (ix *Index) Tools() []*tools.Tool { return slices.Clone(ix.tools) }

// Tool returns the indexed tool with the given model-facing name.
func (ix *Index) Tool(name string) (*tools.Tool, bool) {
	t, ok := ix.byName[name]
	return t, ok
}

// Close releases the index and stops a background embedding.
func (ix *Index) Close() error {
	if ix.sem != nil {
		ix.sem.close()
	}
	return ix.bleve.Close()
}

// Search returns the tools that best match query, best first (equal
// scores by tool id), each with a line saying why it matched. toolkit,
// when not empty, keeps only that toolkit's tools (by id or display
// name, any case). limit <= 0 means DefaultSearchLimit.
//
// The query is read as words: identifiers are split (so a tool name
// works as a query), case is ignored and English words are stemmed;
// words of the thesaurus also match their usual synonyms, at a lower
// weight. When nothing matches, the words are tried again allowing one
// edit each, to forgive a typo. The action the query asks for (send,
// move, cancel…) favours the tools that do it (see action.go).
//
// With semantic ranking configured (IndexOptions.Semantic), the query is
// embedded too and the two rankings fused; when that fails, the answer
// is BM25's and the failure is logged. ctx bounds the query's embedding.
func (ix *Index) Search(ctx context.Context, q, toolkit string, limit int) ([]Hit, error) {
	return ix.search(ctx, q, toolkit, limit, true)
}

func (ix *Index) search(ctx context.Context, q, toolkit string, limit int, semantic bool) ([]Hit, error) {
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	var kit string
	if toolkit = strings.TrimSpace(toolkit); toolkit != "" {
		id, ok := ix.toolkits[strings.ToLower(toolkit)]
		if !ok && len(ix.kitIDs) == 0 {
			return nil, fmt.Errorf("%w %q: no tool is searchable", ErrUnknownToolkit, toolkit)
		}
		if !ok {
			return nil, fmt.Errorf("%w %q: the searchable toolkits are %s", ErrUnknownToolkit, toolkit, strings.Join(ix.kitIDs, ", "))
		}
		kit = strings.ToLower(id)
	}
	terms := ix.queryTerms(q)
	if len(terms) == 0 {
		return nil, nil
	}
	acts := queryActions(splitWords(q))
	kitWeights := ix.kits.weights(terms)
	clauses := ix.fieldClauses(terms)
	hits, err := ix.run(ix.buildQuery(q, terms, clauses, false), clauses, exactKey(q), kit, acts, kitWeights)
	if err == nil && len(hits) == 0 {
		hits, err = ix.run(ix.buildQuery(q, terms, nil, true), nil, "", kit, acts, kitWeights)
	}
	if err != nil {
		return nil, err
	}
	var near map[string]bool // the tools semantic ranking puts near the top
	if semantic && ix.sem != nil {
		var keep func(int) bool
		if kit != "" {
			keep = func(i int) bool { return strings.ToLower(toolkitOf(ix.tools[i])) == kit }
		}
		if ranked := ix.sem.rank(ctx, q, rerankDepth, keep); ranked != nil {
			hits = fuse(hits, ranked, ix.tools)
			near = map[string]bool{}
			for _, i := range ranked[:min(MaxSearchLimit, len(ranked))] {
				near[ix.tools[i].ID] = true
			}
		}
	}
	hits = hits[:min(limit, len(hits))]
	for i := range hits {
		hits[i].Why = ix.why(hits[i].Tool, terms, acts, near[hits[i].Tool.ID])
	}
	return hits, nil
}

// queryTerm is one analysed word of a query with its weight: 1 for the
// query's own words, less for words the thesaurus added.
type queryTerm struct {
	stem   string  // as the index holds it
	plain  string  // lowercased, unstemmed: what a typo fallback compares
	from   string  // for a thesaurus word, the query's word it stands for
	weight float64 // multiplies the field boosts
}

// queryTerms analyses a query: identifiers split, lowercased, stop words
// dropped, stemmed, duplicates merged, at most maxQueryWords; then
// thesaurus expansions.
func (ix *Index) queryTerms(q string) []queryTerm {
	text := splitIdentifiers(q)
	var out []queryTerm
	seen := map[string]bool{}
	add := func(plain, from string, weight float64, limit int) {
		for _, tok := range ix.stemmed.Analyze([]byte(plain)) {
			stem := string(tok.Term)
			if seen[stem] || len(out) >= limit {
				continue
			}
			seen[stem] = true
			out = append(out, queryTerm{stem: stem, plain: plain, from: from, weight: weight})
		}
	}
	var plain analysis.TokenStream
	for _, tok := range ix.plain.Analyze([]byte(text)) {
		if !queryStopWords[string(tok.Term)] {
			plain = append(plain, tok)
		}
	}
	for _, tok := range plain {
		add(string(tok.Term), "", 1, maxQueryWords)
	}
	if ix.synonyms {
		asked := len(out)
		for _, syn := range expansions(plain) {
			add(syn.word, syn.from, synonymWeight, 2*asked)
		}
	}
	return out
}

// buildQuery is a disjunction of per-field queries, each a disjunction
// of the query's terms in that field, boosted by the field's weight: a
// word counts more in the name than in the description, and more there
// than in the parameters. Within a field, a tool covering more of the
// query's words ranks higher (bleve's coordination factor), and so does a
// tool matching in more fields. One more clause matches the query as a
// whole tool name ("MAIL_LIST_LABELS", "mail list labels", "list
// labels"), so asking for a tool by name finds it first.
//
// The fuzzy form is the typo fallback: each unstemmed word matches any
// word within one edit of it, in the name and in the rest of the text.
func (ix *Index) buildQuery(q string, terms []queryTerm, fields [][]clauseTerm, fuzzy bool) query.Query {
	if fuzzy {
		clauses := make([]query.Query, 0, len(fuzzyBoosts))
		for _, fb := range fuzzyBoosts {
			perTerm := make([]query.Query, 0, len(terms))
			for _, t := range terms {
				fq := bleve.NewFuzzyQuery(t.plain)
				fq.SetFuzziness(1)
				fq.SetField(fb.field)
				fq.SetBoost(fb.boost * t.weight)
				perTerm = append(perTerm, fq)
			}
			clauses = append(clauses, bleve.NewDisjunctionQuery(perTerm...))
		}
		return bleve.NewDisjunctionQuery(clauses...)
	}
	clauses := make([]query.Query, 0, len(fieldBoosts)+1)
	for i, fb := range fieldBoosts {
		perTerm := make([]query.Query, 0, len(fields[i]))
		for _, t := range fields[i] {
			tq := bleve.NewTermQuery(t.stem)
			tq.SetField(fb.field)
			tq.SetBoost(t.boost)
			perTerm = append(perTerm, tq)
		}
		clauses = append(clauses, bleve.NewDisjunctionQuery(perTerm...))
	}
	if key := exactKey(q); key != "" {
		tq := bleve.NewTermQuery(key)
		tq.SetField(fieldExact)
		tq.SetBoost(exactBoost)
		clauses = append(clauses, tq)
	}
	return bleve.NewDisjunctionQuery(clauses...)
}

// everywhere reports a term that nearly every tool holds in field (over
// 90 % of a pool of at least 1,000): its idf there is about zero, so it
// cannot change the ranking, yet searching it would score every tool
// ("app" in the toolkit names of a pool of apps).
func (ix *Index) everywhere(field, stem string) bool {
	n := len(ix.tools)
	if n < 1000 {
		return false
	}
	return ix.docFreq(field, stem)*10 > n*9
}

// docFreq is how many tools hold stem in field, read from the index once
// and kept (at most 8,192 terms, then afresh).
func (ix *Index) docFreq(field, stem string) int {
	k := fieldTerm{field, stem}
	ix.dfMu.Lock()
	n, ok := ix.df[k]
	ix.dfMu.Unlock()
	if ok {
		return n
	}
	if adv, err := ix.bleve.Advanced(); err == nil {
		if r, err := adv.Reader(); err == nil {
			if tfr, err := r.TermFieldReader(context.Background(), []byte(stem), field, false, false, false); err == nil {
				n = int(tfr.Count())
				tfr.Close()
			}
			r.Close()
		}
	}
	ix.dfMu.Lock()
	if ix.df == nil || len(ix.df) >= 8192 {
		ix.df = map[fieldTerm]int{}
	}
	ix.df[k] = n
	ix.dfMu.Unlock()
	return n
}

// exactKey is how a tool name is compared whole: its words, lowercased,
// joined with "_".
func exactKey(s string) string { return strings.ToLower(strings.Join(splitWords(s), "_")) }

// run runs q and ranks its best hits again (see rank), at most
// rerankDepth of them. q built from clauses and the whole-name key is
// first answered by scoring only the tools its rare words matched (see
// prune.go), and in full when that cannot be shown to find the same hits.
func (ix *Index) run(q query.Query, clauses [][]clauseTerm, key, kit string, acts []queryAction, kitWeights map[string]float64) ([]Hit, error) {
	var best []scoredTool
	ok := false
	if clauses != nil {
		var err error
		if best, ok, err = ix.prunedTop(q, clauses, key, kit); err != nil {
			return nil, err
		}
		if ok {
			ix.prunedRuns.Add(1)
		}
	}
	if !ok {
		res, err := ix.top(q, kit)
		if err != nil {
			return nil, err
		}
		best = make([]scoredTool, 0, len(res.Hits))
		for _, h := range res.Hits {
			if t, ok := ix.byID[h.ID]; ok {
				best = append(best, scoredTool{t, h.Score})
			}
		}
	}
	hits := make([]Hit, 0, len(best))
	for _, h := range best {
		t := h.tool
		f := ix.facts[t.ID]
		score := h.score * (1 + actionBoost*f.actionMatch(acts)) / (1 + generality*float64(f.specificity))
		if w, ok := kitWeights[toolkitOf(t)]; ok {
			score *= w
		}
		hits = append(hits, Hit{Tool: t, Score: score})
	}
	ix.rank(hits)
	return hits, nil
}

// scoredTool is a tool and its BM25 score.
type scoredTool struct {
	tool  *tools.Tool
	score float64
}

// top is BM25's best rerankDepth hits for q, in toolkit kit when not
// empty, best first.
func (ix *Index) top(q query.Query, kit string) (*bleve.SearchResult, error) {
	if kit != "" {
		tq := bleve.NewTermQuery(kit)
		tq.SetField(fieldKit)
		tq.SetBoost(0) // filters; adds nothing to the score
		q = bleve.NewConjunctionQuery(q, tq)
	}
	req := bleve.NewSearchRequestOptions(q, rerankDepth, 0, false)
	// Score order alone: rank breaks ties by id, and sorting by _id
	// in bleve would load every candidate's id.
	req.SortBy([]string{"-_score"})
	res, err := ix.bleve.Search(req)
	if err != nil {
		return nil, fmt.Errorf("discovery: search: %w", err)
	}
	return res, nil
}

// uniqueStrings is a and b, or a alone when they are equal.
func uniqueStrings(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// generality is how much a tool's score shrinks per unit of its
// specificity (see toolFacts): little enough to decide only between
// tools that match the query about equally well, where the general tool
// (listUsers) is the better first answer than a specialised variant
// (listGroupUsers, listApplicationUsers).
const generality = 0.01

// rank sorts hits best first, equal scores by tool id.
func (ix *Index) rank(hits []Hit) {
	slices.SortStableFunc(hits, func(a, b Hit) int { return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.Tool.ID, b.Tool.ID)) })
}
