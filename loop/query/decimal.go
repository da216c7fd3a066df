package query

import (
	"math"
	"math/big"
	"math/bits"
	"strconv"
)

// Exact decimal arithmetic for aggregates, on the text of JSON numbers:
// a number is an integer coefficient times a power of ten, exactly as it
// was written ("131895.20" is 13189520 × 10⁻²), so sums never drift the
// way binary floating point does (0.1 + 0.2 is 0.3) and integers beyond
// 2⁵³ stay exact. Coefficients that fit in an int64 are added in place;
// larger ones move to math/big, so the common case (money, counts,
// quantities) allocates nothing.

// The range of numbers an aggregate computes with: at most
// maxDecimalPlaces digits after the point (the exponent applied) and a
// magnitude below 10^(maxMagnitude+1). A JSON number outside it (1e5000,
// which no API sends for money) is counted as out_of_range rather than
// summed: aligning it with an ordinary number would need thousands of
// digits.
const (
	maxDecimalPlaces = 1000
	maxMagnitude     = 1000
)

// dec is an exact decimal: coef × 10^exp, where coef is c unless b is
// set (a coefficient beyond int64). A dec is a value: b is never
// modified once the dec holds it.
type dec struct {
	c   int64
	b   *big.Int
	exp int32
}

var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// parseDec reads the decimal text s: an optional sign, digits with an
// optional point (at least one digit), an optional exponent — the JSON
// number grammar, plus a leading '+', ".5" and "5." as numeric strings may
// write them. ok is false when s is not such a text; inRange is false when
// it is one outside the range above.
func parseDec(s []byte) (d dec, ok, inRange bool) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	var c uint64
	sig := 0  // significant digits (leading zeros excluded)
	frac := 0 // digits after the point
	seen := false
	point := false
	for ; i < len(s); i++ {
		ch := s[i]
		if ch == '.' {
			if point {
				return dec{}, false, false
			}
			point = true
			continue
		}
		if ch < '0' || ch > '9' {
			break
		}
		seen = true
		if point {
			frac++
		}
		if sig == 0 && ch == '0' {
			continue
		}
		sig++
		if sig <= 18 {
			c = c*10 + uint64(ch-'0')
		}
	}
	if !seen {
		return dec{}, false, false
	}
	exp := int64(0)
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			eneg = s[i] == '-'
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return dec{}, false, false
		}
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			if exp < 1e9 {
				exp = exp*10 + int64(s[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return dec{}, false, false
	}
	e := exp - int64(frac)
	if sig == 0 { // zero: its exponent only says how many places it has
		if e < -maxDecimalPlaces {
			return dec{}, true, false
		}
		return dec{exp: int32(min(e, 0))}, true, true
	}
	if e < -maxDecimalPlaces || e+int64(sig)-1 > maxMagnitude {
		return dec{}, true, false
	}
	d.exp = int32(e)
	if sig <= 18 {
		d.c = int64(c)
		if neg {
			d.c = -d.c
		}
		return d, true, true
	}
	// A long coefficient: collect its digits for math/big.
	digits := make([]byte, 0, sig+1)
	if neg {
		digits = append(digits, '-')
	}
	lead := true // still before the first significant digit
	for _, ch := range s {
		if ch == 'e' || ch == 'E' {
			break
		}
		if ch < '0' || ch > '9' || lead && ch == '0' {
			continue
		}
		lead = false
		digits = append(digits, ch)
	}
	d.b, _ = new(big.Int).SetString(string(digits), 10)
	return d, true, true
}

// bigOf returns d's coefficient as a big.Int, in tmp when d has none of
// its own.
func (d dec) bigOf(tmp *big.Int) *big.Int {
	if d.b != nil {
		return d.b
	}
	return tmp.SetInt64(d.c)
}

func (d dec) sign() int {
	if d.b != nil {
		return d.b.Sign()
	}
	switch {
	case d.c < 0:
		return -1
	case d.c > 0:
		return 1
	}
	return 0
}

// bigPow10 is 10^n (0 <= n, a few thousand at most).
func bigPow10(n int32) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// scale64 returns c × 10^n when it fits in an int64.
func scale64(c int64, n int32) (int64, bool) {
	if n < 0 || n >= int32(len(pow10)) {
		return 0, n == 0 || c == 0 && n > 0
	}
	p := pow10[n]
	hi, lo := bits.Mul64(uint64(abs64(c)), uint64(p))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	if c < 0 {
		return -int64(lo), true
	}
	return int64(lo), true
}

func abs64(c int64) int64 {
	if c < 0 {
		return -c // math.MinInt64 never occurs: coefficients have at most 18 digits or come from checked sums
	}
	return c
}

// add64 returns a + b when it does not overflow.
func add64(a, b int64) (int64, bool) {
	s := a + b
	if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
		return 0, false
	}
	return s, s != math.MinInt64
}

// acc is an exact running sum. Its zero value is zero.
type acc struct {
	c   int64
	b   *big.Int // the sum, once it left int64
	exp int32
	n   int // numbers added
	tmp big.Int
}

func (a *acc) add(x dec) {
	if a.n == 0 {
		a.n = 1
		a.exp = x.exp
		if x.b != nil {
			a.b = new(big.Int).Set(x.b)
		} else {
			a.c = x.c
		}
		return
	}
	a.n++
	if a.b == nil && x.b == nil {
		if a.exp == x.exp { // the common case: numbers written to the same places
			if s, ok := add64(a.c, x.c); ok {
				a.c = s
				return
			}
		}
		lo, hi := a.c, x.c // lo: the one with the smaller exponent
		loExp, hiExp := a.exp, x.exp
		if loExp > hiExp {
			lo, hi, loExp, hiExp = hi, lo, hiExp, loExp
		}
		if m, ok := scale64(hi, hiExp-loExp); ok {
			if s, ok := add64(lo, m); ok {
				a.c, a.exp = s, loExp
				return
			}
		}
		a.b = new(big.Int).SetInt64(a.c)
	}
	if a.b == nil {
		a.b = new(big.Int).SetInt64(a.c)
	}
	target := min(a.exp, x.exp)
	if a.exp > target {
		a.b.Mul(a.b, bigPow10(a.exp-target))
		a.exp = target
	}
	v := a.tmp.Set(x.bigOf(&a.tmp))
	if x.exp > target {
		v.Mul(v, bigPow10(x.exp-target))
	}
	a.b.Add(a.b, v)
}

// merge adds the sum o.
func (a *acc) merge(o *acc) {
	if o.n == 0 {
		return
	}
	n := a.n + o.n
	a.add(o.value())
	a.n = n
}

// value is the sum as a dec (a copy: the accumulator may go on).
func (a *acc) value() dec {
	if a.b != nil {
		return dec{b: new(big.Int).Set(a.b), exp: a.exp}
	}
	return dec{c: a.c, exp: a.exp}
}

// cmpDec compares two decimals by value.
func cmpDec(x, y dec) int {
	if x.b == nil && y.b == nil {
		if x.exp == y.exp {
			return cmp64(x.c, y.c)
		}
		if x.exp > y.exp {
			if m, ok := scale64(x.c, x.exp-y.exp); ok {
				return cmp64(m, y.c)
			}
		} else if m, ok := scale64(y.c, y.exp-x.exp); ok {
			return cmp64(x.c, m)
		}
	}
	if sx, sy := x.sign(), y.sign(); sx != sy {
		return cmp64(int64(sx), int64(sy))
	}
	var t1, t2 big.Int
	bx := new(big.Int).Set(x.bigOf(&t1))
	by := new(big.Int).Set(y.bigOf(&t2))
	if x.exp > y.exp {
		bx.Mul(bx, bigPow10(x.exp-y.exp))
	} else if y.exp > x.exp {
		by.Mul(by, bigPow10(y.exp-x.exp))
	}
	return bx.Cmp(by)
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// appendDec appends d in plain decimal notation, its scale kept
// ("131895.20", "3000", "0.0001"); zero has no sign.
func appendDec(dst []byte, d dec) []byte {
	var digits []byte
	var buf [24]byte
	neg := d.sign() < 0
	if d.b != nil {
		digits = new(big.Int).Abs(d.b).Append(buf[:0], 10)
	} else {
		u := uint64(d.c)
		if d.c < 0 {
			u = uint64(-d.c)
		}
		digits = strconv.AppendUint(buf[:0], u, 10)
	}
	if neg {
		dst = append(dst, '-')
	}
	if d.exp >= 0 {
		dst = append(dst, digits...)
		if !(len(digits) == 1 && digits[0] == '0') {
			for range d.exp {
				dst = append(dst, '0')
			}
		}
		return dst
	}
	places := int(-d.exp)
	if len(digits) > places {
		dst = append(dst, digits[:len(digits)-places]...)
		dst = append(dst, '.')
		return append(dst, digits[len(digits)-places:]...)
	}
	dst = append(dst, '0', '.')
	for range places - len(digits) {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// normalized is d with trailing zeros of its coefficient dropped (1.50
// and 1.5 become the same value); zero is 0 × 10⁰.
func (d dec) normalized() dec {
	if d.sign() == 0 {
		return dec{}
	}
	if d.b == nil {
		for d.c%10 == 0 {
			d.c /= 10
			d.exp++
		}
		return d
	}
	b := new(big.Int).Set(d.b)
	ten := big.NewInt(10)
	var q, r big.Int
	for {
		q.QuoRem(b, ten, &r)
		if r.Sign() != 0 {
			break
		}
		b.Set(&q)
		d.exp++
	}
	if b.IsInt64() {
		return dec{c: b.Int64(), exp: d.exp}
	}
	return dec{b: b, exp: d.exp}
}

// appendCanonDec appends a text that is equal for equal values (1.50,
// 1.5 and 15e-1 alike), for grouping and distinct counts.
func appendCanonDec(dst []byte, d dec) []byte {
	n := d.normalized()
	dst = appendDec(dst, dec{c: n.c, b: n.b})
	dst = append(dst, 'e')
	return strconv.AppendInt(dst, int64(n.exp), 10)
}

// avgDigits is how many significant digits an average is given.
const avgDigits = 20

// appendAvg appends avgOf(sum, n).
func appendAvg(dst []byte, sum dec, n int) []byte { return appendDec(dst, avgOf(sum, n)) }

// avgOf is sum ÷ n rounded half to even to avgDigits significant digits,
// or to a whole number when its integer part has more digits than that
// (rounding never reaches into the integer part: the average of 3 rows
// summing to 12345678901234567890223 is 4115226300411522630074, not
// 4115226300411522630100), without trailing zeros after the point.
func avgOf(sum dec, n int) dec {
	if sum.sign() == 0 || n <= 0 {
		return dec{}
	}
	neg := sum.sign() < 0
	var t big.Int
	num := new(big.Int).Abs(sum.bigOf(&t))
	den := big.NewInt(int64(n))
	dn, dd := len(num.String()), len(den.String())
	// The quotient's integer digits are at most dn+exp-dd+1: it gets at
	// least two digits more than it keeps.
	k := int32(max(avgDigits, dn+int(sum.exp)-dd+1) + 2 - dn + dd)
	if k >= 0 {
		num.Mul(num, bigPow10(k))
	} else {
		den.Mul(den, bigPow10(-k))
	}
	var q, r big.Int
	q.QuoRem(num, den, &r)
	ql := len(q.String())
	digits := max(avgDigits, ql+int(sum.exp-k)) // q × 10^(exp-k): its integer digits, when more
	drop := int32(ql - digits)
	p := bigPow10(drop)
	var q2, r2 big.Int
	q2.QuoRem(&q, p, &r2)
	r2.Lsh(&r2, 1)
	switch c := r2.Cmp(p); {
	case c > 0, c == 0 && r.Sign() != 0, c == 0 && q2.Bit(0) == 1:
		q2.Add(&q2, big.NewInt(1))
	}
	if neg {
		q2.Neg(&q2)
	}
	d := dec{b: &q2, exp: sum.exp - k + drop}
	if q2.IsInt64() {
		d = dec{c: q2.Int64(), exp: d.exp}
	}
	return trimPlaces(d)
}

// trimPlaces drops the zeros that end d's fraction (2.50 → 2.5, 2.00 →
// 2); the integer part keeps its digits.
func trimPlaces(d dec) dec {
	if d.b == nil {
		for d.exp < 0 && d.c%10 == 0 {
			d.c /= 10
			d.exp++
		}
		return d
	}
	b := new(big.Int).Set(d.b)
	ten := big.NewInt(10)
	var q, r big.Int
	for d.exp < 0 {
		q.QuoRem(b, ten, &r)
		if r.Sign() != 0 {
			break
		}
		b.Set(&q)
		d.exp++
	}
	d.b = b
	return d
}
