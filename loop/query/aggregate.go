package query

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"math/big"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Aggregate is a compiled aggregate: rows grouped by the values of some
// dot-paths, with counts, distinct counts, sums, averages, minima and
// maxima per group, computed exactly on the JSON number text (see
// decimal.go) by the byte scanner, without decoding the rows. It is
// immutable and safe for concurrent use.
//
// Semantics:
//
//   - Paths are dot-paths as in _fields and map over the arrays they
//     meet: "line_items.amount" reaches the amount of every line item, and
//     a field holding an array is read element by element.
//   - A metric reads every value its field reaches. A value that is null
//     counts as null, a path that reaches nothing (a missing key, a scalar
//     where the path goes deeper) as missing, each once per row and per
//     array element; the path through an empty array reaches nothing and
//     counts as neither. sum, avg, min and max read numbers: a JSON number,
//     or a string holding one as _filter reads it ("12.50", counted in
//     NumericStrings); anything else is not_a_number. None is coerced or
//     dropped silently: each is counted in the metric's Skipped.
//   - count counts rows; count with a field counts the values it reaches
//     that are not null; count_distinct the distinct ones (numbers by
//     value, so 1.5 and 1.50 are one; a string is never equal to a
//     number).
//   - A row's group key is the value each group_by path reaches; a row
//     where it reaches nothing, or null, is in the null group. A path that
//     runs through an array reaches a list: the key is then the list of
//     the values reached (each missing one as null), so every row is in
//     exactly one group and the group counts add up to the rows.
//   - sum is exact, with the largest scale of its numbers (12.5 + 0.25 is
//     12.75, 100 + 0.10 is 100.10); avg is the exact sum divided by the
//     numbers summed, rounded half to even to 20 significant digits and
//     written without trailing zeros; min and max are the numbers as
//     written. Over no number they are null.
type Aggregate struct {
	groupBy []int // path index of each group_by path
	names   []string
	groupAt []string // group_by paths as written
	metrics []metricDef
	nums    []numPath
	paths   []aggPath
	first   []string
	byFirst [][]int
	// single[f] is the path that is first[f] alone (no deeper keys, no
	// other path starting with it), or -1; firstEsc[f] marks a first key
	// holding a quote or a backslash, which a raw key cannot be compared
	// with.
	single   []int
	firstEsc []bool
	// valueCounts are the counts and distinct counts of a field (a count
	// of rows is the group's rows; numeric metrics share their path's
	// state).
	valueCounts []int
	filter      *Filter
	having      []havingDef
	order       []orderDef
	limit       int
	// limitAsked is the limit given when it was above the maximum.
	limitAsked int
}

type aggOp uint8

const (
	aggCount aggOp = iota
	aggCountDistinct
	aggSum
	aggAvg
	aggMin
	aggMax
)

var aggOpNames = map[string]aggOp{"count": aggCount, "count_distinct": aggCountDistinct, "sum": aggSum, "avg": aggAvg, "min": aggMin, "max": aggMax}

type metricDef struct {
	name  string
	op    aggOp
	field string // as written; "" for a count of rows
	path  int    // -1 for a count of rows
	num   int    // sum, avg, min, max: index into Aggregate.nums; else -1
}

// numPath is a path that sum, avg, min or max read: its numbers are
// accumulated once per row for all of them.
type numPath struct {
	path     int
	min, max bool // a min or max metric reads it
}

func (m metricDef) numeric() bool { return m.op >= aggSum }

type aggPath struct {
	keys    []string
	numeric bool // a sum, avg, min or max reads it
}

type havingDef struct {
	metric int
	op     opCode
	negate bool
	val    dec
}

type orderDef struct {
	metric int // -1: a group_by path
	group  int
	desc   bool
}

// CompileAggregate checks and compiles an aggregate. A bad member is an
// *AggregateError naming it.
func CompileAggregate(s AggregateSpec) (*Aggregate, error) {
	a := &Aggregate{limit: DefaultAggregateLimit}
	pathIndex := map[string]int{}
	addPath := func(keys []string) int {
		j := JoinPath(keys...)
		if i, ok := pathIndex[j]; ok {
			return i
		}
		pathIndex[j] = len(a.paths)
		a.paths = append(a.paths, aggPath{keys: keys})
		return len(a.paths) - 1
	}
	if len(s.GroupBy) > maxGroupBy {
		return nil, aggErr("group_by", "has %d paths; at most %d", len(s.GroupBy), maxGroupBy)
	}
	for i, g := range s.GroupBy {
		at := fmt.Sprintf("group_by[%d]", i)
		g = strings.TrimSpace(g)
		keys, err := SplitPath(g)
		if err != nil {
			return nil, aggErr(at, "bad path %q: %s", g, err.(*PathError).Msg)
		}
		if len(keys) == 0 {
			return nil, aggErr(at, "is empty; give a dot-path such as \"currency\"")
		}
		for _, prev := range a.groupAt {
			if prev == g {
				return nil, aggErr(at, "%q is given twice", g)
			}
		}
		a.groupAt = append(a.groupAt, g)
		a.groupBy = append(a.groupBy, addPath(keys))
	}
	metrics := s.Metrics
	if len(metrics) == 0 {
		metrics = []Metric{{Op: "count"}}
	}
	if len(metrics) > maxMetrics {
		return nil, aggErr("metrics", "has %d metrics; at most %d", len(metrics), maxMetrics)
	}
	for i, m := range metrics {
		at := fmt.Sprintf("metrics[%d]", i)
		name := strings.ToLower(strings.TrimSpace(m.Op))
		op, ok := aggOpNames[name]
		if !ok {
			if name == "" {
				return nil, aggErr(at+".op", "is missing (ops: %s)", strings.Join(AggregateOps, ", "))
			}
			return nil, aggErr(at+".op", "unknown op %q (ops: %s)", m.Op, strings.Join(AggregateOps, ", "))
		}
		d := metricDef{op: op, path: -1, num: -1, field: strings.TrimSpace(m.Field)}
		if d.field == "" && op != aggCount {
			return nil, aggErr(at+".field", "%s needs a field (a dot-path such as \"total\")", name)
		}
		if d.field != "" {
			keys, err := SplitPath(d.field)
			if err != nil {
				return nil, aggErr(at+".field", "bad path %q: %s", d.field, err.(*PathError).Msg)
			}
			d.path = addPath(keys)
			if d.numeric() {
				a.paths[d.path].numeric = true
				d.num = len(a.nums)
				for k, np := range a.nums {
					if np.path == d.path {
						d.num = k
					}
				}
				if d.num == len(a.nums) {
					a.nums = append(a.nums, numPath{path: d.path})
				}
				a.nums[d.num].min = a.nums[d.num].min || op == aggMin
				a.nums[d.num].max = a.nums[d.num].max || op == aggMax
			}
		}
		d.name = strings.TrimSpace(m.As)
		if d.name == "" {
			d.name = name
			if d.field != "" {
				d.name = name + "(" + d.field + ")"
			}
		}
		for _, prev := range a.metrics {
			if prev.name == d.name {
				return nil, aggErr(at, "the name %q is given to two metrics; name one with \"as\"", d.name)
			}
		}
		for _, g := range a.groupAt {
			if g == d.name {
				return nil, aggErr(at, "the name %q is also a group_by path; name the metric with \"as\"", d.name)
			}
		}
		a.metrics = append(a.metrics, d)
		a.names = append(a.names, d.name)
	}
	if len(s.Filter) > 0 {
		f, err := CompileFilter(s.Filter)
		if err != nil {
			ce := err.(*ClauseError)
			return nil, aggErr(fmt.Sprintf("filter[%d]", ce.Index), "%s (ops: %s)", ce.Reason, strings.Join(validOps, ", "))
		}
		a.filter = f
	}
	for i, c := range s.Having {
		at := fmt.Sprintf("having[%d]", i)
		h, err := a.compileHaving(c, at)
		if err != nil {
			return nil, err
		}
		a.having = append(a.having, h)
	}
	for i, o := range s.OrderBy {
		at := fmt.Sprintf("order_by[%d]", i)
		d := orderDef{metric: -1, group: -1}
		f := strings.TrimSpace(o.Field)
		for k, n := range a.names {
			if n == f {
				d.metric = k
			}
		}
		for k, g := range a.groupAt {
			if g == f {
				d.group = k
			}
		}
		if d.metric < 0 && d.group < 0 {
			if f == "" {
				return nil, aggErr(at+".field", "is missing; name a metric (%s) or a group_by path", strings.Join(a.names, ", "))
			}
			return nil, aggErr(at+".field", "%q is neither a metric (%s) nor a group_by path", f, strings.Join(a.names, ", "))
		}
		switch strings.ToLower(strings.TrimSpace(o.Dir)) {
		case "", "asc":
		case "desc":
			d.desc = true
		default:
			return nil, aggErr(at+".dir", "must be \"asc\" or \"desc\", not %q", o.Dir)
		}
		a.order = append(a.order, d)
	}
	if s.Limit < 0 {
		return nil, aggErr("limit", "must be at least 1, not %d", s.Limit)
	}
	if s.Limit > 0 {
		a.limit = s.Limit
	}
	if a.limit > MaxAggregateLimit {
		a.limitAsked, a.limit = a.limit, MaxAggregateLimit
	}
	for i, p := range a.paths {
		j := 0
		for j < len(a.first) && a.first[j] != p.keys[0] {
			j++
		}
		if j == len(a.first) {
			a.first = append(a.first, p.keys[0])
			a.byFirst = append(a.byFirst, nil)
		}
		a.byFirst[j] = append(a.byFirst[j], i)
	}
	for mi, m := range a.metrics {
		if m.num < 0 && m.path >= 0 {
			a.valueCounts = append(a.valueCounts, mi)
		}
	}
	for f, name := range a.first {
		a.single = append(a.single, -1)
		if ps := a.byFirst[f]; len(ps) == 1 && len(a.paths[ps[0]].keys) == 1 {
			a.single[f] = ps[0]
		}
		a.firstEsc = append(a.firstEsc, strings.ContainsAny(name, `"\\`))
	}
	return a, nil
}

func (a *Aggregate) compileHaving(c Clause, at string) (havingDef, error) {
	h := havingDef{metric: -1}
	f := strings.TrimSpace(c.Field)
	for k, n := range a.names {
		if n == f {
			h.metric = k
		}
	}
	if h.metric < 0 {
		if f == "" {
			return h, aggErr(at+".field", "is missing; name a metric (%s)", strings.Join(a.names, ", "))
		}
		return h, aggErr(at+".field", "%q is not a metric; having tests a metric (%s), filter tests rows", f, strings.Join(a.names, ", "))
	}
	name := strings.ToLower(strings.TrimSpace(c.Op))
	op, ok := opNames[name]
	if !ok || op > opLte {
		return h, aggErr(at+".op", "%q is not a comparison; having takes eq, neq, gt, gte, lt, lte", c.Op)
	}
	h.op = op
	h.negate = name == "neq" || name == "!=" || name == "<>" || name == "ne"
	var text string
	switch v := c.Value.(type) {
	case string:
		text = strings.TrimSpace(v)
		if _, ok := parseNumeric(text); !ok {
			text = ""
		}
	default:
		if s, ok := toScalar(v); ok && s.kind == kNumber {
			text = s.str
		}
	}
	d, ok, inRange := parseDec([]byte(text))
	if text == "" || !ok {
		return h, aggErr(at+".value", "must be a number, not %s", shown(c.Value))
	}
	if !inRange {
		return h, aggErr(at+".value", "%s is out of range", text)
	}
	h.val = d
	return h, nil
}

// Names are the metrics' names, in order (the keys of each group's
// values).
func (a *Aggregate) Names() []string { return append([]string(nil), a.names...) }

// Filter is the aggregate's own filter (nil when it has none).
func (a *Aggregate) Filter() *Filter { return a.filter }

// Skipped counts, per metric, the values it did not compute with, by why.
type Skipped struct {
	Null       int `json:"null"`
	Missing    int `json:"missing"`
	NotANumber int `json:"not_a_number"`
	// OutOfRange: JSON numbers beyond the range decimals are computed in
	// (magnitude 10^1001 or more, or more than 1,000 decimal places).
	OutOfRange int `json:"out_of_range,omitempty"`
}

func (s *Skipped) add(o Skipped) {
	s.Null += o.Null
	s.Missing += o.Missing
	s.NotANumber += o.NotANumber
	s.OutOfRange += o.OutOfRange
}

// Total is how many values were skipped.
func (s Skipped) Total() int { return s.Null + s.Missing + s.NotANumber + s.OutOfRange }

// Value is one metric of one group: an exact number, or null (a sum, avg,
// min or max over no number).
type Value struct {
	// Text is the number as the result writes it ("170", "131895.20");
	// "" when the value is null.
	Text string
	// Count marks a count (an integer, written as a JSON number); other
	// metrics are decimals, written as JSON strings so that no client's
	// float parsing rounds them.
	Count bool
}

// Null reports a null value.
func (v Value) Null() bool { return v.Text == "" }

// Rat is the value as an exact rational (nil when null): what a check of
// a number quoted in an answer compares against.
func (v Value) Rat() *big.Rat {
	if v.Text == "" {
		return nil
	}
	r, ok := new(big.Rat).SetString(v.Text)
	if !ok {
		return nil
	}
	return r
}

// MetricInfo describes one metric of a result.
type MetricInfo struct {
	Name  string `json:"name"`
	Op    string `json:"op"`
	Field string `json:"field,omitempty"`
}

// Group is one group of a result.
type Group struct {
	// Key holds the group's value of each group_by path, as compact JSON
	// ("\"EUR\"", "null", "[\"a\",null]").
	Key []string
	// Rows counts the rows in the group.
	Rows int
	// Values, Skipped and NumericStrings are indexed like the metrics.
	Values         []Value
	Skipped        []Skipped
	NumericStrings []int
}

// AggregateResult is what an aggregate computed, typed.
type AggregateResult struct {
	GroupBy []string
	Metrics []MetricInfo
	// Rows counts the rows aggregated (those that passed the filter).
	Rows int
	// Groups are the groups returned: after having, in order, at most the
	// limit. GroupCount counts the groups after having, before the limit.
	Groups     []Group
	GroupCount int
	// Skipped and NumericStrings total each metric's over every row.
	Skipped        []Skipped
	NumericStrings []int
	// Unmatched lists the group_by and metric paths that no row aggregated
	// reaches (often a misspelt field): every row is then in the null
	// group, or every value missing.
	Unmatched []string
	// Limit is the limit applied; LimitAsked the one asked when it was
	// above the maximum (then lowered to it), else 0.
	Limit, LimitAsked int
}

// Metric returns the index of the metric named name, or -1.
func (r *AggregateResult) Metric(name string) int {
	for i, m := range r.Metrics {
		if m.Name == name {
			return i
		}
	}
	return -1
}

// obs is one value a path reached in a row.
type obs struct {
	v    []byte // the value; nil for null or missing
	kind uint8
}

const (
	obsValue uint8 = iota
	obsNull
	obsMissing
)

// number classes of a value read by sum, avg, min, max.
const (
	numOK uint8 = iota
	numNaN
	numOOR
)

type numObs struct {
	class   uint8
	fromStr bool
	d       dec
}

// rowPath is a path's scratch while one row is read.
type rowPath struct {
	obs  []obs
	nums []numObs
	arr  bool // the path ran through an array
	hit  bool // some row reached a value or a null
}

// mstate is a count's or a distinct count's state in one group.
type mstate struct {
	sk    Skipped
	count int
	set   map[string]struct{}
}

// nstate is a numeric path's state in one group, shared by its sum, avg,
// min and max.
type nstate struct {
	sk       Skipped
	strs     int
	count    int // numbers read
	sum      acc
	min, max dec
}

type keyPart struct {
	raw  string // compact JSON
	rank uint8
	num  dec    // rank numbers
	str  string // rank strings: decoded; composites and out-of-range numbers: raw
	b    bool
}

type groupState struct {
	key  []keyPart
	rows int
	ms   []mstate // by metric (counts and distinct counts)
	ns   []nstate // by numeric path
}

func (a *Aggregate) newGroup() *groupState {
	return &groupState{ms: make([]mstate, len(a.metrics)), ns: make([]nstate, len(a.nums))}
}

// key ranks: how group keys of different kinds order.
const (
	rankNumber uint8 = iota
	rankBigNumber
	rankString
	rankBool
	rankComposite
	rankNull
)

// Run aggregates rows (each one JSON value, normally an object, as
// Elements splits them). Rows that do not pass the aggregate's filter are
// left out. A malformed row is an error naming it.
func (a *Aggregate) Run(rows iter.Seq[[]byte]) (*AggregateResult, error) {
	r := a.newRun()
	i := 0
	for row := range rows {
		if err := r.add(row, i); err != nil {
			return nil, err
		}
		i++
	}
	return r.result(), nil
}

// RunRows is Run over a slice of rows.
func (a *Aggregate) RunRows(rows [][]byte) (*AggregateResult, error) {
	return a.RunIndexed(len(rows), func(i int) []byte { return rows[i] }, nil)
}

// parallelRows is how many rows make RunIndexed split its work.
const parallelRows = 1 << 14

// RunIndexed is Run over the rows row(0) … row(n-1) that pass pre (nil:
// all) as well as the aggregate's own filter. Many rows are aggregated in
// contiguous chunks at once, one per CPU (at most four), and the chunks
// merged in order, so the result is exactly Run's. row must be safe to
// call concurrently.
func (a *Aggregate) RunIndexed(n int, row func(int) []byte, pre *Filter) (*AggregateResult, error) {
	workers := min(runtime.GOMAXPROCS(0), 4, n/parallelRows)
	if workers <= 1 {
		r := a.newRun()
		if err := r.span(0, n, row, pre); err != nil {
			return nil, err
		}
		return r.result(), nil
	}
	runs := make([]*aggRun, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		from, to := n*w/workers, n*(w+1)/workers
		runs[w] = a.newRun()
		wg.Go(func() { errs[w] = runs[w].span(from, to, row, pre) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for _, o := range runs[1:] {
		runs[0].merge(o)
	}
	return runs[0].result(), nil
}

// span aggregates the rows row(from) … row(to-1) that pass pre.
func (r *aggRun) span(from, to int, row func(int) []byte, pre *Filter) error {
	for i := from; i < to; i++ {
		if item := row(i); pre.Match(item) {
			if err := r.add(item, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// aggRun is one pass of an aggregate over rows.
type aggRun struct {
	a       *Aggregate
	scratch []rowPath
	index   map[string]int
	keys    []string // each group's canonical key, for merging
	groups  []*groupState
	key     []byte
	rows    int
	// raw maps the text of a group key seen (one group_by path) to its
	// group: at most maxRawKeys of them.
	raw map[string]int
}

// maxRawKeys bounds aggRun.raw, which duplicates keys: past it, groups
// are found by their canonical key alone.
const maxRawKeys = 4096

func (a *Aggregate) newRun() *aggRun {
	return &aggRun{a: a, scratch: make([]rowPath, len(a.paths)), index: map[string]int{}, raw: map[string]int{}}
}

// add aggregates row, the i-th.
func (r *aggRun) add(row []byte, i int) error {
	a := r.a
	if a.filter != nil && !a.filter.Match(row) {
		return nil
	}
	if err := a.read(row, r.scratch); err != nil {
		return fmt.Errorf("query: aggregate: row %d: %w", i, err)
	}
	r.rows++
	// One group_by path reaching one value (not through an array): the
	// value's text names the group as well as its canonical form does, so
	// a text seen before finds the group without building the key.
	var raw []byte
	if len(a.groupBy) == 1 {
		if s := &r.scratch[a.groupBy[0]]; !s.arr && len(s.obs) == 1 && s.obs[0].kind == obsValue {
			raw = s.obs[0].v
			if gi, ok := r.raw[bstr(raw)]; ok {
				a.update(r.groups[gi], r.scratch, &r.key)
				return nil
			}
		}
	}
	r.key = r.key[:0]
	for _, p := range a.groupBy {
		r.key = appendKeyCanon(r.key, &r.scratch[p])
	}
	gi, ok := r.index[string(r.key)]
	if raw != nil && len(r.raw) < maxRawKeys {
		r.raw[string(raw)] = gi
		if !ok {
			r.raw[string(raw)] = len(r.groups)
		}
	}
	if !ok {
		gi = len(r.groups)
		k := string(r.key)
		r.index[k] = gi
		r.keys = append(r.keys, k)
		g := a.newGroup()
		for _, p := range a.groupBy {
			g.key = append(g.key, keyPartOf(&r.scratch[p]))
		}
		r.groups = append(r.groups, g)
	}
	a.update(r.groups[gi], r.scratch, &r.key)
	return nil
}

// merge adds the run over the rows after r's: groups first seen there
// come after r's, and what r saw first stays first.
func (r *aggRun) merge(o *aggRun) {
	r.rows += o.rows
	for p := range r.scratch {
		r.scratch[p].hit = r.scratch[p].hit || o.scratch[p].hit
	}
	for oi, og := range o.groups {
		gi, ok := r.index[o.keys[oi]]
		if !ok {
			r.index[o.keys[oi]] = len(r.groups)
			r.keys = append(r.keys, o.keys[oi])
			r.groups = append(r.groups, og)
			continue
		}
		g := r.groups[gi]
		g.rows += og.rows
		for mi := range g.ms {
			m, om := &g.ms[mi], &og.ms[mi]
			m.sk.add(om.sk)
			m.count += om.count
			if om.set != nil && m.set == nil {
				m.set = map[string]struct{}{}
			}
			for k := range om.set {
				m.set[k] = struct{}{}
			}
		}
		for ni := range g.ns {
			ns, on := &g.ns[ni], &og.ns[ni]
			ns.sk.add(on.sk)
			ns.strs += on.strs
			if on.count > 0 {
				if ns.count == 0 || cmpDec(on.min, ns.min) < 0 {
					ns.min = on.min
				}
				if ns.count == 0 || cmpDec(on.max, ns.max) > 0 {
					ns.max = on.max
				}
				ns.sum.merge(&on.sum)
			}
			ns.count += on.count
		}
	}
}

func (r *aggRun) result() *AggregateResult {
	if len(r.a.groupBy) == 0 && len(r.groups) == 0 {
		r.groups = append(r.groups, r.a.newGroup())
	}
	return r.a.result(r.rows, r.groups, r.scratch)
}

// read collects what every path reaches in row.
func (a *Aggregate) read(row []byte, scratch []rowPath) error {
	for k := range scratch {
		s := &scratch[k]
		s.obs, s.nums, s.arr = s.obs[:0], s.nums[:0], false
	}
	i := skipSpace(row, 0)
	if i >= len(row) {
		return syntaxErr(row, i, "value")
	}
	if row[i] == '{' && len(a.first) <= 64 {
		if err := a.readObject(row, i, scratch); err != nil {
			return err
		}
	} else {
		for p := range a.paths {
			if err := reachPath(&scratch[p], a.paths[p].keys, row, i, 0, 0); err != nil {
				return err
			}
		}
	}
	var buf [64]byte
	for p := range a.paths {
		s := &scratch[p]
		for _, o := range s.obs {
			if o.kind != obsMissing {
				s.hit = true
			}
		}
		if !a.paths[p].numeric || len(s.nums) == len(s.obs) {
			continue // not read as numbers, or read so already
		}
		for _, o := range s.obs {
			if o.kind != obsValue {
				s.nums = append(s.nums, numObs{})
				continue
			}
			s.nums = append(s.nums, numberOfValue(o.v, buf[:0]))
		}
	}
	return nil
}

// readObject is read over an object row starting at row[i] == '{', in
// one pass over its members up to the last one a path starts with. A
// top-level scalar that is the whole of its path (the common case:
// "total", "currency") is read once, a number straight into its decimal.
func (a *Aggregate) readObject(row []byte, i int, scratch []rowPath) error {
	var seen uint64
	found := 0
	j := skipSpace(row, i+1)
	if j < len(row) && row[j] == '}' {
		j = len(row) // an empty object: every path is missing
	}
	for j < len(row) && found < len(a.first) {
		if row[j] != '"' {
			return syntaxErr(row, j, "object key")
		}
		f, ke := a.keyAt(row, j, seen)
		if ke < 0 {
			return &SyntaxError{Offset: len(row), Msg: "unterminated string"}
		}
		j = skipSpace(row, ke)
		if j >= len(row) || row[j] != ':' {
			return syntaxErr(row, j, "':' after object key")
		}
		vs := skipSpace(row, j+1)
		if vs >= len(row) {
			return syntaxErr(row, vs, "value")
		}
		ve := -1
		if f >= 0 {
			seen |= 1 << f
			found++
			if p := a.single[f]; p >= 0 && row[vs] != '[' && row[vs] != '{' && row[vs] != 'n' {
				s := &scratch[p]
				var err error
				if c := row[vs]; a.paths[p].numeric && (c == '-' || '0' <= c && c <= '9') {
					var n numObs
					if ve, n, err = readNumber(row, vs); err != nil {
						return err
					}
					s.nums = append(s.nums, n)
				} else if ve, err = skipValueDepth(row, vs, 1); err != nil {
					return err
				}
				s.obs = append(s.obs, obs{v: row[vs:ve]})
			} else {
				for _, p := range a.byFirst[f] {
					if err := reachPath(&scratch[p], a.paths[p].keys, row, vs, 1, 1); err != nil {
						return err
					}
				}
			}
			if found == len(a.first) {
				break
			}
		}
		if ve < 0 {
			if ve = skipFast(row, vs); ve < 0 {
				return syntaxErr(row, vs, "value")
			}
		}
		j = skipSpace(row, ve)
		if j >= len(row) {
			return syntaxErr(row, j, "',' or '}'")
		}
		switch row[j] {
		case '}':
			j = len(row)
		case ',':
			j = skipSpace(row, j+1)
			if j >= len(row) {
				return syntaxErr(row, j, "object key")
			}
		default:
			return syntaxErr(row, j, "',' or '}'")
		}
	}
	for f := range a.first {
		if seen&(1<<f) == 0 {
			for _, p := range a.byFirst[f] {
				scratch[p].obs = append(scratch[p].obs, obs{kind: obsMissing})
			}
		}
	}
	return nil
}

// keyAt reads the key whose string starts at row[j] == '"': the index of
// the first key it is among those not yet seen (-1 when none), and where
// its string ends (-1 when it does not). A first key compared in place
// (one without a quote or a backslash) needs no scan for the key's end.
func (a *Aggregate) keyAt(row []byte, j int, seen uint64) (f, ke int) {
	for f, name := range a.first {
		if seen&(1<<f) == 0 && !a.firstEsc[f] {
			if e := j + 1 + len(name); e < len(row) && row[e] == '"' && bstr(row[j+1:e]) == name {
				return f, e + 1
			}
		}
	}
	if ke = stringEnd(row, j); ke < 0 {
		return -1, -1
	}
	key := row[j+1 : ke-1]
	if bytes.IndexByte(key, '\\') < 0 {
		// Not escaped, so the key is its text: only a first key with a
		// quote or a backslash is left to compare, and none can be it.
		return -1, ke
	}
	var buf [64]byte
	dec := appendUnescaped(buf[:0], key)
	for f, name := range a.first {
		if seen&(1<<f) == 0 && bstr(dec) == name {
			return f, ke
		}
	}
	return -1, ke
}

// readNumber reads the JSON number at b[i] as numberOfValue does, and
// returns where it ends: in the same pass when it is short and plain
// (at most 18 digits, no exponent), the case of money and counts.
func readNumber(b []byte, i int) (int, numObs, error) {
	j := i
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	var c uint64
	digits, frac := 0, 0
	switch {
	case j < len(b) && b[j] == '0':
		j++
		digits = 1
	case j < len(b) && '1' <= b[j] && b[j] <= '9':
		for ; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
			c = c*10 + uint64(b[j]-'0')
			digits++
		}
	default:
		return 0, numObs{}, syntaxErr(b, j, "digit")
	}
	if j < len(b) && b[j] == '.' {
		j++
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return 0, numObs{}, syntaxErr(b, j, "digit after decimal point")
		}
		for ; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
			c = c*10 + uint64(b[j]-'0')
			digits++
			frac++
		}
	}
	if digits > 18 || j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		end, err := scanNumber(b, i)
		if err != nil {
			return 0, numObs{}, err
		}
		return end, numberOfValue(b[i:end], nil), nil
	}
	d := dec{c: int64(c), exp: int32(-frac)}
	if neg {
		d.c = -d.c
	}
	return j, numObs{d: d}, nil
}

// numberOfValue reads the value v as sum, avg, min and max do.
func numberOfValue(v, buf []byte) numObs {
	switch c := v[0]; {
	case c == '-' || '0' <= c && c <= '9':
		d, ok, in := parseDec(v)
		switch {
		case !ok:
			return numObs{class: numNaN}
		case !in:
			return numObs{class: numOOR}
		}
		return numObs{d: d}
	case c == '"':
		s := stringValue(buf, v)
		if _, ok := parseNumeric(bstr(s)); !ok {
			return numObs{class: numNaN}
		}
		d, ok, in := parseDec(s)
		switch {
		case !ok:
			return numObs{class: numNaN}
		case !in:
			return numObs{class: numOOR, fromStr: true}
		}
		return numObs{d: d, fromStr: true}
	}
	return numObs{class: numNaN}
}

// reachPath follows keys from key k over the value at b[i], recording
// what it reaches in s.
func reachPath(s *rowPath, keys []string, b []byte, i, k, depth int) error {
	if k == len(keys) {
		return reachLeaf(s, b, i, depth)
	}
	switch b[i] {
	case '{':
		m := newMembers(b, i, depth, false)
		for {
			key, esc, vs, ok := m.key()
			if !ok {
				if m.err != nil {
					return m.err
				}
				s.obs = append(s.obs, obs{kind: obsMissing})
				return nil
			}
			if keyEqual(key, esc, keys[k]) {
				if vs >= len(b) {
					return syntaxErr(b, vs, "value")
				}
				return reachPath(s, keys, b, vs, k+1, depth+1)
			}
		}
	case '[':
		s.arr = true
		e := newElems(b, i, depth, false)
		for {
			vs, _, ok := e.next()
			if !ok {
				return e.err
			}
			if err := reachPath(s, keys, b, vs, k, depth+1); err != nil {
				return err
			}
		}
	case 'n':
		if _, err := scanLiteral(b, i, "null"); err != nil {
			return err
		}
		s.obs = append(s.obs, obs{kind: obsNull})
		return nil
	}
	if skipFast(b, i) < 0 {
		return syntaxErr(b, i, "value")
	}
	s.obs = append(s.obs, obs{kind: obsMissing})
	return nil
}

// reachLeaf records the value at b[i], element by element for an array.
func reachLeaf(s *rowPath, b []byte, i, depth int) error {
	switch b[i] {
	case '[':
		s.arr = true
		e := newElems(b, i, depth, false)
		for {
			vs, _, ok := e.next()
			if !ok {
				return e.err
			}
			if err := reachLeaf(s, b, vs, depth+1); err != nil {
				return err
			}
		}
	case 'n':
		if _, err := scanLiteral(b, i, "null"); err != nil {
			return err
		}
		s.obs = append(s.obs, obs{kind: obsNull})
		return nil
	}
	end, err := skipValueDepth(b, i, depth)
	if err != nil {
		return err
	}
	s.obs = append(s.obs, obs{v: b[i:end]})
	return nil
}

// appendCanon appends a text equal for equal JSON values (numbers by
// value, strings by content), prefixed by its length.
func appendCanon(dst, v []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	switch c := v[0]; {
	case c == '"':
		dst = append(dst, 's')
		var tmp [64]byte
		dst = append(dst, stringValue(tmp[:0], v)...)
	case c == '-' || '0' <= c && c <= '9':
		if d, ok, in := parseDec(v); ok && in {
			dst = append(dst, 'n')
			dst = appendCanonDec(dst, d)
		} else {
			dst = append(dst, 'x')
			dst = append(dst, v...)
		}
	case c == 't', c == 'f':
		dst = append(dst, c)
	default:
		dst = append(dst, 'o')
		dst = appendCompact(dst, v)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// appendKeyCanon appends the canonical text of a row's group key at s.
func appendKeyCanon(dst []byte, s *rowPath) []byte {
	if !s.arr {
		for _, o := range s.obs {
			if o.kind == obsValue {
				return appendCanon(dst, o.v)
			}
		}
		return append(dst, 0, 0, 0, 1, 'z')
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 'l')
	for _, o := range s.obs {
		if o.kind == obsValue {
			dst = appendCanon(dst, o.v)
		} else {
			dst = append(dst, 0, 0, 0, 1, 'z')
		}
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// keyPartOf is the group key at s, for output and ordering.
func keyPartOf(s *rowPath) keyPart {
	if s.arr {
		raw := []byte{'['}
		for i, o := range s.obs {
			if i > 0 {
				raw = append(raw, ',')
			}
			if o.kind == obsValue {
				raw = appendCompact(raw, o.v)
			} else {
				raw = append(raw, "null"...)
			}
		}
		raw = append(raw, ']')
		return keyPart{raw: string(raw), rank: rankComposite, str: string(raw)}
	}
	for _, o := range s.obs {
		if o.kind != obsValue {
			continue
		}
		v := o.v
		switch c := v[0]; {
		case c == '"':
			var buf [64]byte
			return keyPart{raw: string(v), rank: rankString, str: string(stringValue(buf[:0], v))}
		case c == '-' || '0' <= c && c <= '9':
			if d, ok, in := parseDec(v); ok && in {
				return keyPart{raw: string(v), rank: rankNumber, num: d}
			}
			return keyPart{raw: string(v), rank: rankBigNumber, str: string(v)}
		case c == 't' || c == 'f':
			return keyPart{raw: string(v), rank: rankBool, b: c == 't'}
		}
		raw := string(appendCompact(nil, v))
		return keyPart{raw: raw, rank: rankComposite, str: raw}
	}
	return keyPart{raw: "null", rank: rankNull}
}

func cmpKeyPart(x, y keyPart) int {
	if x.rank != y.rank {
		return cmp64(int64(x.rank), int64(y.rank))
	}
	switch x.rank {
	case rankNumber:
		return cmpDec(x.num, y.num)
	case rankBool:
		switch {
		case x.b == y.b:
			return 0
		case y.b:
			return -1
		}
		return 1
	case rankNull:
		return 0
	}
	return strings.Compare(x.str, y.str)
}

// update adds the row just read to group g.
func (a *Aggregate) update(g *groupState, scratch []rowPath, key *[]byte) {
	g.rows++
	for _, mi := range a.valueCounts {
		m := a.metrics[mi]
		st := &g.ms[mi]
		for _, o := range scratch[m.path].obs {
			switch o.kind {
			case obsNull:
				st.sk.Null++
			case obsMissing:
				st.sk.Missing++
			default:
				if m.op == aggCount {
					st.count++
					continue
				}
				if st.set == nil {
					st.set = map[string]struct{}{}
				}
				*key = appendCanon((*key)[:0], o.v)
				if _, ok := st.set[string(*key)]; !ok {
					st.set[string(*key)] = struct{}{}
				}
			}
		}
	}
	for ni, np := range a.nums {
		st := &g.ns[ni]
		s := &scratch[np.path]
		for k, o := range s.obs {
			switch o.kind {
			case obsNull:
				st.sk.Null++
				continue
			case obsMissing:
				st.sk.Missing++
				continue
			}
			nv := &s.nums[k]
			if nv.fromStr && nv.class != numNaN {
				st.strs++
			}
			switch nv.class {
			case numNaN:
				st.sk.NotANumber++
				continue
			case numOOR:
				st.sk.OutOfRange++
				continue
			}
			st.sum.add(nv.d)
			if np.min && (st.count == 0 || cmpDec(nv.d, st.min) < 0) {
				st.min = nv.d
			}
			if np.max && (st.count == 0 || cmpDec(nv.d, st.max) > 0) {
				st.max = nv.d
			}
			st.count++
		}
	}
}

// valueOf is a group's metric as a Value, and as a dec for having and
// ordering (ok false when null).
func (a *Aggregate) valueOf(mi int, g *groupState) (Value, dec, bool) {
	m := a.metrics[mi]
	switch m.op {
	case aggCount:
		n := g.ms[mi].count
		if m.path < 0 {
			n = g.rows
		}
		return Value{Text: strconv.Itoa(n), Count: true}, dec{c: int64(n)}, true
	case aggCountDistinct:
		st := &g.ms[mi]
		return Value{Text: strconv.Itoa(len(st.set)), Count: true}, dec{c: int64(len(st.set))}, true
	}
	st := &g.ns[m.num]
	if st.count == 0 {
		return Value{}, dec{}, false
	}
	var d dec
	switch m.op {
	case aggSum:
		d = st.sum.value()
	case aggAvg:
		d = avgOf(st.sum.value(), st.count)
	case aggMin:
		d = st.min
	default:
		d = st.max
	}
	return Value{Text: string(appendDec(nil, d))}, d, true
}

// skippedOf is a group's metric's skipped values and numbers read from
// strings.
func (a *Aggregate) skippedOf(mi int, g *groupState) (Skipped, int) {
	if m := a.metrics[mi]; m.num >= 0 {
		return g.ns[m.num].sk, g.ns[m.num].strs
	}
	return g.ms[mi].sk, 0
}

type builtGroup struct {
	g      *groupState
	values []Value
	decs   []dec
	ok     []bool
}

func (a *Aggregate) result(rows int, groups []*groupState, scratch []rowPath) *AggregateResult {
	r := &AggregateResult{GroupBy: append([]string(nil), a.groupAt...), Rows: rows, Limit: a.limit, LimitAsked: a.limitAsked,
		Skipped: make([]Skipped, len(a.metrics)), NumericStrings: make([]int, len(a.metrics))}
	for _, m := range a.metrics {
		op := ""
		for name, o := range aggOpNames {
			if o == m.op {
				op = name
			}
		}
		r.Metrics = append(r.Metrics, MetricInfo{Name: m.name, Op: op, Field: m.field})
	}
	built := make([]builtGroup, 0, len(groups))
	for _, g := range groups {
		b := builtGroup{g: g, values: make([]Value, len(a.metrics)), decs: make([]dec, len(a.metrics)), ok: make([]bool, len(a.metrics))}
		for mi := range a.metrics {
			b.values[mi], b.decs[mi], b.ok[mi] = a.valueOf(mi, g)
			sk, strs := a.skippedOf(mi, g)
			r.Skipped[mi].add(sk)
			r.NumericStrings[mi] += strs
		}
		if a.keep(b) {
			built = append(built, b)
		}
	}
	sort.SliceStable(built, func(i, j int) bool { return a.less(built[i], built[j]) })
	r.GroupCount = len(built)
	for _, b := range built[:min(len(built), a.limit)] {
		g := Group{Rows: b.g.rows, Values: b.values, Skipped: make([]Skipped, len(a.metrics)), NumericStrings: make([]int, len(a.metrics))}
		for _, k := range b.g.key {
			g.Key = append(g.Key, k.raw)
		}
		for mi := range a.metrics {
			g.Skipped[mi], g.NumericStrings[mi] = a.skippedOf(mi, b.g)
		}
		r.Groups = append(r.Groups, g)
	}
	if rows > 0 {
		seen := map[int]bool{}
		note := func(p int, written string) {
			if !scratch[p].hit && !seen[p] {
				seen[p] = true
				r.Unmatched = append(r.Unmatched, written)
			}
		}
		for k, p := range a.groupBy {
			note(p, a.groupAt[k])
		}
		for _, m := range a.metrics {
			if m.path >= 0 {
				note(m.path, m.field)
			}
		}
	}
	return r
}

// keep applies having to a group.
func (a *Aggregate) keep(b builtGroup) bool {
	for _, h := range a.having {
		if !b.ok[h.metric] {
			return false
		}
		c := cmpDec(b.decs[h.metric], h.val)
		var hit bool
		switch h.op {
		case opEq:
			hit = c == 0
		case opGt:
			hit = c > 0
		case opGte:
			hit = c >= 0
		case opLt:
			hit = c < 0
		case opLte:
			hit = c <= 0
		}
		if hit == h.negate {
			return false
		}
	}
	return true
}

// less orders groups by order_by (null metrics last either way), then
// by key.
func (a *Aggregate) less(x, y builtGroup) bool {
	for _, o := range a.order {
		var c int
		if o.metric >= 0 {
			xo, yo := x.ok[o.metric], y.ok[o.metric]
			switch {
			case !xo && !yo:
				continue
			case !xo:
				return false
			case !yo:
				return true
			}
			c = cmpDec(x.decs[o.metric], y.decs[o.metric])
		} else {
			xn, yn := x.g.key[o.group].rank == rankNull, y.g.key[o.group].rank == rankNull
			switch {
			case xn && yn:
				continue
			case xn:
				return false
			case yn:
				return true
			}
			c = cmpKeyPart(x.g.key[o.group], y.g.key[o.group])
		}
		if o.desc {
			c = -c
		}
		if c != 0 {
			return c < 0
		}
	}
	for k := range x.g.key {
		if c := cmpKeyPart(x.g.key[k], y.g.key[k]); c != 0 {
			return c < 0
		}
	}
	return false
}
