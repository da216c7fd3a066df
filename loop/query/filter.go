package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Clause is one `_filter` condition. A filter is a list of clauses that
// must all hold.
type Clause struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value any    `json:"value,omitempty"`
}

func (c Clause) String() string {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Sprintf("{field:%q op:%q value:%v}", c.Field, c.Op, c.Value)
	}
	return string(b)
}

// validOps lists the filter operators, in the order error messages give
// them.
var validOps = []string{"eq", "neq", "gt", "gte", "lt", "lte", "contains", "in", "exists"}

// ClauseError reports a clause that cannot be compiled. Its message names
// the clause by index and text and lists the valid operators, so a model
// reading it can correct itself.
type ClauseError struct {
	Index  int
	Clause Clause
	// Key is the clause member at fault ("" when the fault is not one
	// member's).
	Key    string
	Reason string
}

func (e *ClauseError) Error() string {
	return fmt.Sprintf("query: filter clause %d %s: %s (valid ops: %s)",
		e.Index, e.Clause, e.Reason, strings.Join(validOps, ", "))
}

type opCode uint8

const (
	opEq opCode = iota
	opGt
	opGte
	opLt
	opLte
	opContains
	opIn
	opExists
)

var opNames = map[string]opCode{
	"eq": opEq, "=": opEq, "==": opEq,
	"neq": opEq, "!=": opEq, "<>": opEq, "ne": opEq,
	"gt": opGt, ">": opGt,
	"gte": opGte, ">=": opGte,
	"lt": opLt, "<": opLt,
	"lte": opLte, "<=": opLte,
	"contains": opContains,
	"in":       opIn,
	"exists":   opExists,
}

// Filter is a compiled `_filter`: clauses ANDed together. It is immutable
// and safe for concurrent use.
//
// Semantics, per clause, for the values the field path reaches (a path
// maps over arrays along the way, and a field holding an array is tested
// element by element; any value satisfying the clause is enough):
//
//   - eq, gt, gte, lt, lte: numbers compare as numbers; a numeric string
//     (like "12.50") compared with a number compares as a number too;
//     strings, ISO dates included, compare as strings, byte by byte, case
//     sensitive; booleans and null support eq only. Values of different
//     kinds never satisfy a clause.
//   - neq is the negation of eq: it also holds when the field is absent.
//   - eq null holds when the field is absent or null; neq null when it is
//     present and not null.
//   - contains: on a string, a case-insensitive substring test (numbers
//     are matched on their JSON text); on an array, element equality (eq).
//   - in: the value is an array; eq against any of its elements.
//   - exists: the value is a boolean (default true): whether the field is
//     present and not null.
//
// The symbolic spellings =, ==, !=, <>, ne, >, >=, <, <= are accepted as
// aliases of eq, neq, gt, gte, lt, lte.
type Filter struct {
	clauses []clause
	// first lists the distinct first keys of the clauses; byFirst[j]
	// the clauses starting with first[j]. Match reads an object item's
	// top-level members once for all clauses.
	first   []string
	byFirst [][]int
}

type clause struct {
	keys   []string
	op     opCode
	negate bool
	val    scalar   // eq, gt, gte, lt, lte, contains
	set    []scalar // in
	needle string   // contains: val's text, lowercased
	ascii  bool     // needle is ASCII
}

type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
)

// scalar is a compiled comparison value.
type scalar struct {
	kind  kind
	b     bool
	num   float64 // kNumber, or kString when isNum
	isNum bool    // kString that reads as a number
	isInt bool    // num came from an integer literal that fits int64
	i     int64
	str   string // kString; kNumber: its literal text
}

// CompileFilter compiles clauses. No clauses gives a filter that keeps
// every row.
func CompileFilter(clauses []Clause) (*Filter, error) {
	f := &Filter{clauses: make([]clause, 0, len(clauses))}
	for i, c := range clauses {
		cc, reason := compileClause(c)
		if reason != "" {
			return nil, &ClauseError{Index: i, Clause: c, Reason: reason}
		}
		f.clauses = append(f.clauses, cc)
		j := 0
		for j < len(f.first) && f.first[j] != cc.keys[0] {
			j++
		}
		if j == len(f.first) {
			f.first = append(f.first, cc.keys[0])
			f.byFirst = append(f.byFirst, nil)
		}
		f.byFirst[j] = append(f.byFirst[j], i)
	}
	return f, nil
}

// ParseFilter decodes and compiles a `_filter` argument: one clause
// object or an array of them, read as strictly as ClausesOf reads them.
func ParseFilter(raw []byte) (*Filter, error) {
	clauses, err := ClausesFromJSON(raw)
	if err != nil {
		return nil, err
	}
	return CompileFilter(clauses)
}

// ClausesFromJSON is ClausesOf of a JSON text: it accepts and rejects
// exactly what ClausesOf does, with the same errors, and decodes the
// common well-formed case straight into clauses.
func ClausesFromJSON(raw []byte) ([]Clause, error) {
	raw = trimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		if clauses, ok := clausesFast(raw); ok {
			return clauses, nil
		}
	}
	v, err := decodeArg(raw)
	if err != nil {
		return nil, fmt.Errorf("query: filter must be a clause {\"field\",\"op\",\"value\"} or an array of them: %w", err)
	}
	return ClausesOf(v)
}

// clausesFast reads a well-formed array of clauses with the scanner:
// only the members field, op (strings) and value; anything else is left
// to ClausesOf to reject with its error.
func clausesFast(raw []byte) ([]Clause, bool) {
	els, err := Elements(raw)
	if err != nil {
		return nil, false
	}
	out := make([]Clause, 0, len(els))
	for _, e := range els {
		if e[0] != '{' {
			return nil, false
		}
		var c Clause
		ok := true
		m := newMembers(e, 0, 0, false)
		for ok {
			key, esc, vs, ve, more := m.next()
			if !more {
				break
			}
			v := e[vs:ve]
			switch {
			case esc:
				ok = false // rare: leave it to ClausesOf
			case string(key) == "field":
				c.Field, ok = plainString(v)
			case string(key) == "op":
				c.Op, ok = plainString(v)
			case string(key) == "value":
				c.Value, ok = scalarValue(v)
			default:
				ok = false
			}
		}
		if !ok || m.err != nil {
			return nil, false
		}
		out = append(out, c)
	}
	return out, true
}

// plainString is the JSON string v without escapes, unquoted; false
// for one with escapes or invalid UTF-8 (which decoding repairs).
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// scalarValue decodes a clause value as decodeArg would: numbers as
// json.Number; strings with escapes, arrays and objects by decodeArg.
func scalarValue(v []byte) (any, bool) {
	switch {
	case string(v) == "null":
		return nil, true
	case string(v) == "true":
		return true, true
	case string(v) == "false":
		return false, true
	case v[0] == '"':
		if s, ok := plainString(v); ok {
			return s, true
		}
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		return json.Number(v), true
	}
	x, err := decodeArg(v)
	return x, err == nil
}

// clauseKeys are the members of a clause, in the order messages give them.
var clauseKeys = []string{"field", "op", "value"}

// ClausesOf reads `_filter` clauses from a decoded JSON value — one
// clause object or an array of them ([]Clause passes through) — strictly:
// a clause that is not an object, a member other than field, op and
// value (a misspelt "valu" would otherwise match everything), or a field
// or op that is not a string is a *ClauseError naming the clause and the
// key. Operators and values are checked by CompileFilter.
func ClausesOf(v any) ([]Clause, error) {
	switch x := v.(type) {
	case []Clause:
		return x, nil
	case Clause:
		return []Clause{x}, nil
	case map[string]any: // one clause without the array
		v = []any{x}
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("query: filter must be a clause {\"field\",\"op\",\"value\"} or an array of them, not %s", KindName(v))
	}
	out := make([]Clause, 0, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, &ClauseError{Index: i, Reason: fmt.Sprintf("is %s, not a {\"field\",\"op\",\"value\"} object", KindName(e))}
		}
		var c Clause
		c.Field, _ = m["field"].(string)
		c.Op, _ = m["op"].(string)
		c.Value = m["value"]
		for k := range m {
			if k != "field" && k != "op" && k != "value" {
				// Name the first unknown key in order, whatever the map's.
				for _, k := range sortedKeys(m) {
					if k != "field" && k != "op" && k != "value" {
						return nil, &ClauseError{Index: i, Clause: c, Key: k, Reason: fmt.Sprintf("unknown key %q; a clause has only %s", k, strings.Join(clauseKeys, ", "))}
					}
				}
			}
		}
		for _, k := range clauseKeys[:2] {
			if x, has := m[k]; has && x != nil {
				if _, isStr := x.(string); !isStr {
					return nil, &ClauseError{Index: i, Clause: c, Key: k, Reason: fmt.Sprintf("%s must be a string, not %s", k, KindName(x))}
				}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// PathsOf reads `_fields` paths from a decoded JSON value: an array of
// strings, or one string of comma-separated paths ("id,customer.name").
// Paths are checked by CompileFields.
func PathsOf(v any) ([]string, error) {
	const shape = "must be an array of dot-paths such as [\"id\", \"customer.name\"] or a comma-separated string"
	var out []string
	switch x := v.(type) {
	case string:
		for p := range strings.SplitSeq(x, ",") {
			out = append(out, strings.TrimSpace(p)) // an empty one is CompileFields' error
		}
	case []string:
		out = x
	case []any:
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%s; element %d is %s", shape, i, KindName(e))
			}
			out = append(out, strings.TrimSpace(s))
		}
	default:
		return nil, fmt.Errorf("%s, not %s", shape, KindName(v))
	}
	return out, nil
}

// decodeArg decodes one JSON argument value, numbers as json.Number.
func decodeArg(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(trimSpace(raw)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the value")
	}
	return v, nil
}

// KindName names a decoded JSON value's kind for error messages ("a string", "an array").
func KindName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, float64, float32, int, int64:
		return "a number"
	case []any, []string:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func compileClause(c Clause) (clause, string) {
	var cc clause
	field := strings.TrimSpace(c.Field)
	if field == "" {
		return cc, "field is missing"
	}
	keys, err := SplitPath(field)
	if err != nil {
		return cc, fmt.Sprintf("bad field path: %s", err.(*PathError).Msg)
	}
	cc.keys = keys
	name := strings.ToLower(strings.TrimSpace(c.Op))
	op, ok := opNames[name]
	if !ok {
		if name == "" {
			return cc, "op is missing"
		}
		return cc, fmt.Sprintf("unknown op %q", c.Op)
	}
	cc.op = op
	cc.negate = name == "neq" || name == "!=" || name == "<>" || name == "ne"
	switch op {
	case opExists:
		want := true
		switch v := c.Value.(type) {
		case nil:
		case bool:
			want = v
		default:
			return cc, "exists takes true or false"
		}
		cc.negate = !want
	case opIn:
		list, ok := asList(c.Value)
		if !ok {
			return cc, "in takes an array of values"
		}
		for _, v := range list {
			s, ok := toScalar(v)
			if !ok {
				return cc, "in takes an array of strings, numbers, booleans or nulls"
			}
			cc.set = append(cc.set, s)
		}
	default:
		s, ok := toScalar(c.Value)
		if !ok {
			if _, isList := asList(c.Value); isList {
				return cc, "value must be a string, number, boolean or null (use op \"in\" for a list)"
			}
			return cc, "value must be a string, number, boolean or null"
		}
		cc.val = s
		switch op {
		case opEq:
			if s.kind == kNull { // eq null: absent or null
				cc.op, cc.negate = opExists, !cc.negate
			}
		case opGt, opGte, opLt, opLte:
			if s.kind != kNumber && s.kind != kString {
				return cc, fmt.Sprintf("%s compares numbers or strings", name)
			}
		case opContains:
			switch s.kind {
			case kString, kNumber:
				cc.needle = strings.ToLower(s.str)
			case kBool:
				cc.needle = strconv.FormatBool(s.b)
			default:
				return cc, "contains takes a string or a number"
			}
			cc.ascii = isASCII(cc.needle)
		}
	}
	return cc, ""
}

func asList(v any) ([]any, bool) {
	switch l := v.(type) {
	case []any:
		return l, true
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, true
	case []float64:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, true
	case []int:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

func toScalar(v any) (scalar, bool) {
	switch x := v.(type) {
	case nil:
		return scalar{kind: kNull}, true
	case bool:
		return scalar{kind: kBool, b: x}, true
	case string:
		s := scalar{kind: kString, str: x}
		if n, ok := parseNumeric(x); ok {
			s.isNum, s.num = true, n
			s.i, s.isInt = parseInt(x)
		}
		return s, true
	case json.Number:
		return numberScalar(string(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return scalar{}, false
		}
		return numberScalar(strconv.FormatFloat(x, 'f', -1, 64))
	case float32:
		return toScalar(float64(x))
	case int:
		return numberScalar(strconv.FormatInt(int64(x), 10))
	case int64:
		return numberScalar(strconv.FormatInt(x, 10))
	case int32:
		return numberScalar(strconv.FormatInt(int64(x), 10))
	case uint:
		return numberScalar(strconv.FormatUint(uint64(x), 10))
	case uint64:
		return numberScalar(strconv.FormatUint(x, 10))
	}
	return scalar{}, false
}

func numberScalar(text string) (scalar, bool) {
	n, ok := parseNumeric(text)
	if !ok {
		return scalar{}, false
	}
	s := scalar{kind: kNumber, num: n, str: text}
	s.i, s.isInt = parseInt(text)
	return s, true
}

// parseNumeric reads s as a decimal number: digits, sign, point and
// exponent only (no hex, no "inf", no underscores, no spaces).
func parseNumeric(s string) (float64, bool) {
	if s == "" || len(s) > 64 {
		return 0, false
	}
	digit := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digit = true
		case c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E':
		default:
			return 0, false
		}
	}
	if !digit {
		return 0, false
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(n, 0) {
		return 0, false
	}
	return n, true
}

// parseInt reads s as an int64 when it is an integer literal.
func parseInt(s string) (int64, bool) {
	if strings.ContainsAny(s, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "+"), 10, 64)
	return n, err == nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Match reports whether item satisfies every clause. Malformed JSON met
// on the way does not match.
func (f *Filter) Match(item []byte) bool {
	if f == nil {
		return true
	}
	i := skipSpace(item, 0)
	if i >= len(item) {
		return false
	}
	if item[i] == '{' && len(f.first) <= 64 {
		return f.matchObject(item, i)
	}
	for k := range f.clauses {
		c := &f.clauses[k]
		hit, err := c.reach(item, i, 0, 0)
		if err != nil || hit == c.negate {
			return false
		}
	}
	return true
}

// matchObject is Match for an object item: one pass over its members,
// stopping at the first clause that fails or once every first key is seen.
func (f *Filter) matchObject(b []byte, i int) bool {
	var seen uint64 // bit j: first[j] found
	found := 0
	m := newMembers(b, i, 0, false)
	for found < len(f.first) {
		key, esc, vs, ok := m.key()
		if !ok {
			if m.err != nil {
				return false
			}
			break
		}
		for j, name := range f.first {
			if seen&(1<<j) != 0 || !keyEqual(key, esc, name) {
				continue
			}
			seen |= 1 << j
			found++
			if vs >= len(b) {
				return false
			}
			for _, k := range f.byFirst[j] {
				c := &f.clauses[k]
				hit, err := c.reach(b, vs, 1, 1)
				if err != nil || hit == c.negate {
					return false
				}
			}
			break
		}
	}
	// Clauses whose first key is absent reach nothing.
	for j := range f.first {
		if seen&(1<<j) == 0 {
			for _, k := range f.byFirst[j] {
				if !f.clauses[k].negate {
					return false
				}
			}
		}
	}
	return true
}

// reach follows c.keys from key k over the value at b[i] and reports
// whether any value reached satisfies the positive form of the clause.
func (c *clause) reach(b []byte, i, k, depth int) (bool, error) {
	if k == len(c.keys) {
		return c.test(b, i, depth)
	}
	switch b[i] {
	case '{':
		m := newMembers(b, i, depth, false)
		for {
			key, esc, vs, ok := m.key()
			if !ok {
				return false, m.err
			}
			if keyEqual(key, esc, c.keys[k]) {
				if vs >= len(b) {
					return false, syntaxErr(b, vs, "value")
				}
				return c.reach(b, vs, k+1, depth+1)
			}
		}
	case '[':
		e := newElems(b, i, depth, false)
		for {
			vs, _, ok := e.next()
			if !ok {
				return false, e.err
			}
			if hit, err := c.reach(b, vs, k, depth+1); hit || err != nil {
				return hit, err
			}
		}
	}
	return false, nil
}

// test applies the clause to the value at b[i].
func (c *clause) test(b []byte, i, depth int) (bool, error) {
	switch c.op {
	case opExists:
		if b[i] == 'n' {
			_, err := scanLiteral(b, i, "null")
			return false, err
		}
		if skipFast(b, i) < 0 {
			return false, syntaxErr(b, i, "value")
		}
		return true, nil
	}
	if b[i] == '[' {
		e := newElems(b, i, depth, false)
		for {
			vs, ve, ok := e.next()
			if !ok {
				return false, e.err
			}
			var hit bool
			var err error
			if c.op == opContains {
				hit = equal(b[vs:ve], c.val)
			} else {
				hit, err = c.test(b, vs, depth+1)
			}
			if hit || err != nil {
				return hit, err
			}
		}
	}
	end, err := skipValueDepth(b, i, depth)
	if err != nil {
		return false, err
	}
	v := b[i:end]
	switch c.op {
	case opEq:
		return equal(v, c.val), nil
	case opIn:
		for _, s := range c.set {
			if equal(v, s) {
				return true, nil
			}
		}
		return false, nil
	case opContains:
		switch v[0] {
		case '"':
			var buf [128]byte
			return c.containsFold(stringValue(buf[:0], v)), nil
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 't', 'f':
			return c.containsFold(v), nil
		}
		return false, nil
	}
	r, ok := order(v, c.val)
	if !ok {
		return false, nil
	}
	switch c.op {
	case opGt:
		return r > 0, nil
	case opGte:
		return r >= 0, nil
	case opLt:
		return r < 0, nil
	default: // opLte
		return r <= 0, nil
	}
}

// stringValue returns the decoded content of the JSON string v, using
// buf when it needs unescaping.
func stringValue(buf []byte, v []byte) []byte {
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	return appendUnescaped(buf, raw)
}

func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// numberOf reads a JSON number, or a JSON string holding a decimal
// number, as a float64 (and as an int64 when it is an integer literal).
func numberOf(v []byte) (n float64, i int64, isInt, ok bool) {
	if n, i, isInt, ok = shortNumber(v); ok {
		return n, i, isInt, true
	}
	return parseNumberOf(v)
}

// exact10 holds the powers of ten a float64 holds exactly.
var exact10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// shortNumber is numberOf for a JSON number of at most 15 digits without
// an exponent (prices, counts, ids): its digits, a float64 exactly, over
// a power of ten a float64 holds exactly is rounded once, by the
// division, as strconv.ParseFloat rounds it. ok is false for any other
// text, which numberOf leaves to strconv.
func shortNumber(v []byte) (n float64, i int64, isInt, ok bool) {
	j := 0
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		j++
	}
	var m uint64
	digits, frac := 0, -1 // frac: digits after the point; -1: no point
	for ; j < len(v); j++ {
		c := v[j]
		switch {
		case '0' <= c && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
			if frac >= 0 {
				frac++
			}
		case c == '.' && frac < 0 && digits > 0:
			frac = 0
		default:
			return 0, 0, false, false
		}
	}
	if digits == 0 || digits > 15 || frac == 0 {
		return 0, 0, false, false
	}
	if frac < 0 {
		i = int64(m)
		n = float64(m)
		if neg {
			i, n = -i, -n
		}
		return n, i, true, true
	}
	n = float64(m) / exact10[frac]
	if neg {
		n = -n
	}
	return n, 0, false, true
}

// parseNumberOf is numberOf by strconv, for any number.
func parseNumberOf(v []byte) (n float64, i int64, isInt, ok bool) {
	text := v
	if v[0] == '"' {
		text = v[1 : len(v)-1]
		if n, ok = parseNumeric(bstr(text)); !ok {
			return 0, 0, false, false
		}
	} else {
		var err error
		if n, err = strconv.ParseFloat(bstr(text), 64); err != nil && !isRangeErr(err) {
			return 0, 0, false, false
		}
	}
	if !bytes.ContainsAny(text, ".eE") {
		t := text
		if len(t) > 0 && t[0] == '+' {
			t = t[1:]
		}
		if x, err := strconv.ParseInt(bstr(t), 10, 64); err == nil {
			return n, x, true, true
		}
	}
	return n, 0, false, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// compareNumbers compares exactly when both are int64s.
func compareNumbers(a float64, ai int64, aInt bool, s scalar) int {
	if aInt && s.isInt {
		switch {
		case ai < s.i:
			return -1
		case ai > s.i:
			return 1
		}
		return 0
	}
	switch {
	case a < s.num:
		return -1
	case a > s.num:
		return 1
	}
	return 0
}

// order compares the JSON scalar v with s; ok is false when the two are
// not of comparable kinds.
func order(v []byte, s scalar) (int, bool) {
	switch v[0] {
	case '"':
		if s.kind == kNumber {
			n, i, isInt, ok := numberOf(v)
			if !ok {
				return 0, false
			}
			return compareNumbers(n, i, isInt, s), true
		}
		if s.kind != kString {
			return 0, false
		}
		var buf [128]byte
		return bytes.Compare(stringValue(buf[:0], v), unsafe.Slice(unsafe.StringData(s.str), len(s.str))), true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if s.kind != kNumber && !(s.kind == kString && s.isNum) {
			return 0, false
		}
		n, i, isInt, ok := numberOf(v)
		if !ok {
			return 0, false
		}
		return compareNumbers(n, i, isInt, s), true
	}
	return 0, false
}

// equal reports whether the JSON value v equals s.
func equal(v []byte, s scalar) bool {
	switch v[0] {
	case 't', 'f':
		return s.kind == kBool && s.b == (v[0] == 't')
	case 'n':
		return s.kind == kNull
	case '{', '[':
		return false
	}
	r, ok := order(v, s)
	return ok && r == 0
}

// containsFold reports whether h contains the clause's needle, ignoring
// case.
func (c *clause) containsFold(h []byte) bool {
	n := c.needle
	if len(n) == 0 {
		return true
	}
	if !c.ascii || !isASCII(bstr(h)) {
		return strings.Contains(strings.ToLower(bstr(h)), n)
	}
	first := n[0]
	upper := first
	if 'a' <= first && first <= 'z' {
		upper = first - 'a' + 'A'
	}
	for i := 0; i+len(n) <= len(h); i++ {
		if h[i] != first && h[i] != upper {
			continue
		}
		j := 1
		for ; j < len(n); j++ {
			hc := h[i+j]
			if 'A' <= hc && hc <= 'Z' {
				hc += 'a' - 'A'
			}
			if hc != n[j] {
				break
			}
		}
		if j == len(n) {
			return true
		}
	}
	return false
}

// Unmatched returns the fields of the clauses that no row has (the path
// reaches nothing in any row, mapping over arrays), in clause order and
// without repeats: what `_unmatchedFilter` reports — a filter on such a
// field matches nothing, or everything with neq, because of a misspelt or
// absent field rather than the data. A nil filter has none.
func (f *Filter) Unmatched(rows [][]byte) []string {
	if f == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range f.clauses {
		path := JoinPath(c.keys...)
		if seen[path] {
			continue
		}
		seen[path] = true
		found := false
		for _, r := range rows {
			if r = trimSpace(r); len(r) > 0 && resolves(r, c.keys) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, path)
		}
	}
	return out
}

// Test reports whether the JSON value v satisfies op with value, under
// exactly the clause semantics of Filter (the ops, numbers and numeric
// strings, dates as strings, an array tested element by element, eq null
// and neq on an absent value): the comparison a workflow's branch
// condition makes, so that a branch and a _filter never disagree. A nil
// v is an absent value. A bad op or value is a *ClauseError.
func Test(v []byte, op string, value any) (bool, error) {
	f, err := CompileFilter([]Clause{{Field: "v", Op: op, Value: value}})
	if err != nil {
		return false, err
	}
	v = trimSpace(v)
	if len(v) == 0 {
		return f.Match([]byte("{}")), nil
	}
	doc := make([]byte, 0, len(v)+6)
	doc = append(doc, `{"v":`...)
	doc = append(doc, v...)
	return f.Match(append(doc, '}')), nil
}
