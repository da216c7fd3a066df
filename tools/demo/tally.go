package demo

import (
	"encoding/json"
	"math/big"
	"sort"
)

// OrderTally is one currency's share of a set of orders: how many, and
// their totals summed exactly.
type OrderTally struct {
	Currency string
	Count    int
	// Sum is the exact sum of the orders' totals, with two decimals
	// ("131895.20").
	Sum string
}

// TallyOrders counts the orders with status whose total is more than
// over, per currency, most orders first, summing each total's JSON text
// as a big.Rat: the demo's first question ("how many open orders worth
// more than 100, and how do they split by currency?") answered from the
// data itself, for tests to hold answers against.
func TallyOrders(status string, over float64) []OrderTally {
	sums := map[string]*big.Rat{}
	counts := map[string]int{}
	for _, o := range acmeData().orders {
		if o.Status != status || o.Total <= over {
			continue
		}
		text, _ := json.Marshal(o.Total)
		r, _ := new(big.Rat).SetString(string(text))
		if sums[o.Currency] == nil {
			sums[o.Currency] = new(big.Rat)
		}
		sums[o.Currency].Add(sums[o.Currency], r)
		counts[o.Currency]++
	}
	out := make([]OrderTally, 0, len(sums))
	for c, s := range sums {
		out = append(out, OrderTally{Currency: c, Count: counts[c], Sum: s.FloatString(2)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Currency < out[j].Currency
	})
	return out
}
