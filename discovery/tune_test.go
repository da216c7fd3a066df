package discovery

import (
	"flag"
	"testing"
)

var tune = flag.Bool("tune", false, "TestTune: print the tuning sets' figures over a grid of field boosts")

// TestTune is how the boosts were chosen: run with -tune to print the
// tuning sets' figures (never the held-out set's) for each boost of each
// field, the others kept.
func TestTune(t *testing.T) {
	if !*tune {
		t.Skip("run with -tune")
	}
	ix := newTestIndex(t, allDemoTools(t), vendorTools(t))
	demo := newTestIndex(t, allDemoTools(t))
	sets := map[string][]labelledQuery{
		demoSet:   loadQueries(t, demoSet, ix),
		tuningSet: loadQueries(t, tuningSet, ix),
	}
	score := func() (float64, string) {
		var sum float64
		var line string
		d := evaluate(t, demo, sets[demoSet])
		a := evaluate(t, ix, sets[demoSet])
		b := evaluate(t, ix, sets[tuningSet])
		sum = d.MRR + a.MRR + b.MRR
		line = "demo " + d.String() + " | demo/all " + a.String() + " | tuning " + b.String()
		return sum, line
	}
	base, line := score()
	t.Logf("base %.3f %s", base, line)
	for i := range fieldBoosts {
		orig := fieldBoosts[i].boost
		for _, f := range []float64{0, 0.5, 2} {
			fieldBoosts[i].boost = orig * f
			s, line := score()
			t.Logf("%s=%.2f: %.3f %s", fieldBoosts[i].field, fieldBoosts[i].boost, s, line)
		}
		fieldBoosts[i].boost = orig
	}
	for _, v := range []*float64{&actionBoost, &kitBoost, &synonymWeight} {
		orig := *v
		for _, f := range []float64{0, 0.5, 2} {
			*v = orig * f
			s, line := score()
			t.Logf("%p=%.2f: %.3f %s", v, *v, s, line)
		}
		*v = orig
	}
}
