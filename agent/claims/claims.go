// Package claims checks a final answer against the verdicts of the tool
// calls it was drawn from: an answer that states a count, a total, or
// "all"/"every"/"complete list" about a call whose walk was not complete
// (partial, unstable, failed, first page only, or a list no walk vouched
// for) makes an unsupported claim. The chat runner uses it to warn or to
// revise an answer; replays and evaluations use it as an honesty check.
//
//	calls := []claims.Call{claims.ReadCall("call_1", "acme.list_orders", output, "")}
//	for _, f := range claims.Check(answer, calls) {
//		fmt.Println(f.Reason)
//	}
//
// What counts as a claim, in English and French: a number followed by
// what it counts ("120 orders", "120 commandes"); a universal ("all",
// "every", "each of the", "tous les", "chaque", "l'ensemble des"); a
// completeness ("complete list", "full list", "the list is complete",
// "liste complète", "exhaustive"); a total or an exact count ("in total",
// "a total of", "exactly", "au total", "en tout", "exactement"); and a
// number that is one of an aggregate's values, which carries the
// aggregate's own completion. A hedge in the same sentence makes the claim
// supported ("at least 20", "the first 20", "20 so far", "20 of more than
// 50", "not all", "au moins 20", "les 20 premières"), and a disclaimer
// anywhere in the answer ("this is not a complete list", "more exist",
// "la liste n'est pas complète") supports a plain count. Numbers that are
// dates, times, prices, percentages, durations or identifiers count
// nothing; "all" in unrelated senses ("that's all", "at all", "c'est
// tout", "tous les jours") claims nothing.
package claims

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/loop/query"
)

// Verdict is how far a call's result can be trusted for a count: the
// loop's completion, or what the check makes of a result without one.
type Verdict string

const (
	Complete       Verdict = Verdict(loop.Complete)
	Partial        Verdict = Verdict(loop.Partial)
	Unstable       Verdict = Verdict(loop.Unstable)
	SingleResponse Verdict = Verdict(loop.SingleResponse)
	// FirstPageOnly: a paginated tool called without _all_pages (a
	// partial walk of one page).
	FirstPageOnly Verdict = paginate.StopFirstPage
	// Failed: the call returned an error; it holds no rows at all.
	Failed Verdict = "failed"
	// Unverified: a list from a call that did not loop (its binding has
	// loop_responses off): nothing says whether it holds every row.
	Unverified Verdict = "unverified"
)

// Verdicts are the verdicts a call can have.
var Verdicts = []Verdict{Complete, Partial, Unstable, FirstPageOnly, SingleResponse, Failed, Unverified}

// Supports reports whether a count or "all" over a result of verdict v
// can be true: a complete walk, or a single response that claims no
// rows.
func (v Verdict) Supports() bool { return v == Complete || v == SingleResponse }

// Call is one tool call of the turn, as the check sees it.
type Call struct {
	ID      string
	Tool    string
	Verdict Verdict
	// Records is how many rows the call holds; -1 when unknown.
	Records int
	// Aggregate is the call's _aggregate (nil: none); its numbers carry
	// the aggregate's own completion.
	Aggregate *loop.AggregateReport
}

// ReadCall reads a call's result: output is the tool's JSON text,
// errText its error (non-empty: the call failed). The envelope is read
// with loop.ReadEnvelope; a result that does not parse counts as
// unverified when it is a list.
func ReadCall(id, tool string, output []byte, errText string) Call {
	c := Call{ID: id, Tool: tool, Records: -1}
	if errText != "" {
		c.Verdict = Failed
		return c
	}
	env, _ := loop.ReadEnvelope(output) // what could be read is used
	c.Aggregate = env.Aggregate
	if env.Boundary != nil && env.Boundary.Records != nil {
		c.Records = *env.Boundary.Records
	}
	switch {
	case env.Boundary != nil && env.Boundary.StopReason == paginate.StopFirstPage:
		c.Verdict = FirstPageOnly
	case env.Completion != "":
		c.Verdict = Verdict(env.Completion)
	case env.Aggregate != nil && env.Aggregate.Completion != "":
		c.Verdict = Verdict(env.Aggregate.Completion)
	case holdsList(output):
		c.Verdict = Unverified
	default:
		c.Verdict = SingleResponse
	}
	return c
}

// holdsList reports whether output is a JSON array or an object with an
// array member: rows that a plain call may hold only some of.
func holdsList(output []byte) bool {
	switch query.FirstByte(output) {
	case '[':
		return true
	case '{':
		list := false
		_ = query.EachMember(output, func(_ []byte, name string, value []byte) {
			if !strings.HasPrefix(name, "_") && query.FirstByte(value) == '[' {
				list = true
			}
		})
		return list
	}
	return false
}

// KindUnsupported names the finding of a claim the calls do not support.
const KindUnsupported = "unsupported_claim"

// Finding is one unsupported claim.
type Finding struct {
	Kind string `json:"kind"` // KindUnsupported
	// Claim is the words that claim ("all 120 items"); Sentence the
	// sentence holding them.
	Claim    string `json:"claim"`
	Sentence string `json:"sentence"`
	// CallID, Tool and Verdict name the call the claim is about.
	CallID  string  `json:"callId"`
	Tool    string  `json:"tool"`
	Verdict Verdict `json:"verdict"`
	// Reason says it in words, with what to say instead.
	Reason string `json:"reason"`
}

// Check reports each claim of answer that the calls do not support (the
// first of each sentence, per call; bytes that are not UTF-8 read as
// U+FFFD). An
// answer over calls that are all complete (or single responses) is never
// read further: it claims nothing unsupported.
func Check(answer string, calls []Call) []Finding {
	if !slices.ContainsFunc(calls, func(c Call) bool { return !c.numbersVerdict().Supports() || !c.Verdict.Supports() }) {
		return nil
	}
	sents := sentences(unmark.Replace(strings.ToValidUTF8(answer, "\uFFFD")))
	disclaimed := slices.ContainsFunc(sents, func(s string) bool { return hedged(fold(s)) })
	var out []Finding
	seen := map[string]bool{}
	for _, s := range sents {
		norm := fold(s)
		if hedged(norm) {
			continue
		}
		for _, cl := range findClaims(s, norm, calls) {
			if !cl.strong && disclaimed {
				continue
			}
			c, ok := cl.about(norm, calls)
			if !ok {
				continue
			}
			key := c.ID + "\x00" + s // one finding per call and sentence: its first claim
			if seen[key] {
				continue
			}
			seen[key] = true
			v := c.Verdict
			if cl.agg != nil {
				v = c.numbersVerdict()
			}
			out = append(out, Finding{Kind: KindUnsupported, Claim: cl.text, Sentence: strings.TrimSpace(s),
				CallID: c.ID, Tool: c.Tool, Verdict: v, Reason: reason(cl.text, c, v)})
		}
	}
	return out
}

// numbersVerdict is the verdict of the call's aggregate numbers.
func (c Call) numbersVerdict() Verdict {
	if c.Aggregate != nil && c.Aggregate.Completion != "" {
		return Verdict(c.Aggregate.Completion)
	}
	return c.Verdict
}

func reason(claim string, c Call, v Verdict) string {
	what := map[Verdict]string{
		Partial:       "was partial (rows are missing)",
		Unstable:      "was unstable (the collection changed during the walk, so rows may be missing or counted twice)",
		FirstPageOnly: "fetched only the first page",
		Failed:        "failed (it returned no rows)",
		Unverified:    "did not loop, so nothing says it holds every row",
	}[v]
	if what == "" {
		what = "was " + string(v)
	}
	return fmt.Sprintf("%q states a count, a total or \"all\", but %s (%s) %s: say \"at least\" or \"the first\" N, or that the list is not complete",
		claim, c.Tool, c.ID, what)
}

// claim is one claiming phrase of a sentence.
type claim struct {
	text   string
	strong bool    // a universal, a total, an exact count or completeness
	number float64 // the number claimed; NaN for a universal without one
	agg    *Call   // the call whose aggregate holds the number, if any
}

// about is the call the claim is about, if the claim is unsupported: the
// call whose aggregate holds its number; else the calls its words name (a
// tool's noun: "orders" or "commandes" for list_orders), else those the
// sentence names; else any call, unless the number claimed (or, for a
// universal without one, a number of the sentence) is the row count of a
// complete call.
func (cl claim) about(sent string, calls []Call) (Call, bool) {
	if cl.agg != nil {
		return *cl.agg, !cl.agg.numbersVerdict().Supports()
	}
	named := namedBy(fold(cl.text), calls)
	if len(named) == 0 {
		named = namedBy(sent, calls)
	}
	if len(named) == 0 {
		named = calls
		nums := []float64{cl.number}
		if math.IsNaN(cl.number) {
			nums = nil
			for _, m := range numberRe.FindAllString(sent, -1) {
				if n, ok := parseNumber(m); ok {
					nums = append(nums, n)
				}
			}
		}
		for _, c := range calls {
			if c.Verdict.Supports() && c.Records >= 0 && slices.Contains(nums, float64(c.Records)) {
				return Call{}, false
			}
		}
	}
	for _, c := range named {
		if !c.Verdict.Supports() {
			return c, true
		}
	}
	return Call{}, false
}

// namedBy are the calls whose tool text s names.
func namedBy(s string, calls []Call) []Call {
	var named []Call
	for _, c := range calls {
		if names(s, c.Tool) {
			named = append(named, c)
		}
	}
	return named
}

// names reports whether text s names what tool lists: one of its name's
// nouns, singular or plural, in English or by its French word
// ("acme.list_orders": "order", "orders", "commandes").
func names(s, tool string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(tool), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if toolVerbs[w] || len(w) < 3 {
			continue
		}
		stem := singular(w)
		for _, sw := range words(s) {
			if sw = singular(sw); sw == stem || french[sw] == stem {
				return true
			}
		}
	}
	return false
}

// french maps the French nouns of common collections (folded, singular)
// to the English nouns tools are named with.
var french = map[string]string{
	"commande": "order", "client": "customer", "facture": "invoice", "produit": "product", "article": "item",
	"salarie": "employee", "employe": "employee", "utilisateur": "user", "depot": "repo", "tache": "task",
	"demande": "request", "element": "item", "ligne": "row", "enregistrement": "record", "paiement": "payment",
	"abonnement": "subscription", "projet": "project", "fichier": "file", "evenement": "event", "message": "message",
}

var toolVerbs = set("list get search fetch query find read all by for and the with show lookup retrieve")

func singular(w string) string {
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ses") || strings.HasSuffix(w, "xes"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
}

func set(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// fold lowercases s rune by rune and folds accents, typographic
// apostrophes and spaces, one rune for one, so that offsets in the folded
// text are offsets in s and the patterns (in ASCII, where Go's \b works)
// match French as written.
func fold(s string) string {
	rs := []rune(s)
	for i, r := range rs {
		r = unicode.ToLower(r)
		switch r {
		case 'à', 'â', 'ä', 'æ':
			r = 'a'
		case 'é', 'è', 'ê', 'ë':
			r = 'e'
		case 'î', 'ï':
			r = 'i'
		case 'ô', 'ö', 'œ':
			r = 'o'
		case 'ù', 'û', 'ü':
			r = 'u'
		case 'ç':
			r = 'c'
		case 'ÿ':
			r = 'y'
		case '’', '‘', 'ʼ':
			r = '\''
		case '\u00a0', '\u202f', '\u2009':
			r = ' '
		}
		rs[i] = r
	}
	return string(rs)
}

// unmark drops Markdown emphasis and code marks, which split words.
var unmark = strings.NewReplacer("**", "", "__", "", "`", "")

// span is s's text at the byte range [i, j) of fold(s).
func span(s, folded string, i, j int) string {
	rs := []rune(s)
	return strings.TrimSpace(string(rs[utf8.RuneCountInString(folded[:i]):utf8.RuneCountInString(folded[:j])]))
}

// sentences splits text at sentence ends and line breaks (a semicolon
// joins two clauses of one claim); a
// dot inside a number ("1.5", "2.000") does not end a sentence.
func sentences(text string) []string {
	var out []string
	start := 0
	rs := []rune(text)
	flush := func(end int) {
		if s := strings.TrimSpace(string(rs[start:end])); s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i, r := range rs {
		switch r {
		case '\n', '!', '?':
			flush(i + 1)
		case '.':
			if i+1 < len(rs) && unicode.IsDigit(rs[i+1]) && i > 0 && unicode.IsDigit(rs[i-1]) {
				continue
			}
			flush(i + 1)
		}
	}
	flush(len(rs))
	return out
}

// Hedges: a sentence holding one says the data may be incomplete.
var hedges = regexp.MustCompile(strings.Join([]string{
	// English
	`\bat least\b`, `\bat minimum\b`, `\bminimum of\b`, `\bmore than \d`, `\bor more\b`, `\d\+`,
	`\bthe first (\d|page|few|batch|\w+ (rows|items|results|records|entries))`, `\bfirst \d`, `\bfirst page\b`, `\bone page\b`,
	`\bso far\b`, `\bthus far\b`, `\bup to now\b`, `\bfor now\b`,
	`\bnot (a |the |an )?(complete|full|exhaustive|entire|whole|final)\b`, `\bincomplete\b`, `\bpartial(ly)?\b`, `\bnon-exhaustive\b`,
	`\b(may|might|could|can) (be|have|exist|remain)\b.{0,20}\b(more|others|other|additional|missing|gaps|further)\b`,
	`\b(more|others|additional|further) (rows|items|records|results|entries|ones|pages)? ?(exist|remain|may|might|could|are available|were not)`,
	`\bthere (are|is|were|may be|might be|could be) (more|others|additional|further)\b`,
	`\bnot (yet )?(all|every|everything)\b`, `\bnot (been )?(fetched|loaded|retrieved|read) (all|every|in full)`,
	`\b(could not|couldn't|can't|cannot|did not|didn't|was unable to|were unable to|unable to|failed to) (fetch|load|get|retrieve|read|list|walk|see|count|page)\b`,
	`\bonly (the |a )?(first|some|part|portion|sample|subset)\b`, `\bsample\b`, `\bsubset\b`,
	`\b\d[\d,. ]* (out )?of (more than|at least|over) `,
	`\b(rows|items|records|results|entries|pages|data|some|others|ones) (may be |might be |could be |are |were |still )?missing\b`, `\bmissing (rows|items|records|results|entries|pages|data)\b`,
	`\bonly (\w+ ){0,2}(part|some|a few|a portion)\b`, `\bchanged (during|while)\b`, `\bgaps?\b`,
	`\blower bound\b`, `\bmay not be (complete|exhaustive|all)\b`, `\bnot (be )?(complete|exhaustive)\b`,
	// French
	`\bau moins\b`, `\bau minimum\b`, `\bplus de \d`, `\bou plus\b`, `\bpremi[ee]re page\b`, `\bune (seule )?page\b`,
	`\b\d+ premi[ee]re?s?\b`, `\bpremi[ee]re?s? \d`, `\bjusqu'(ici|a present|a maintenant)\b`, `\bpour l'instant\b`, `\bpour le moment\b`, `\ba ce stade\b`,
	`\bpas (une |la |un |le )?(liste |decompte |total )?(complete?s?|exhaustive?s?|entiere?s?|definitif|definitive|integrale?)\b`,
	`\bincompl[ee]te?s?\b`, `\bnon exhaustive?s?\b`, `\bpartiel(le)?s?\b`, `\bpartiellement\b`,
	`\bil (peut|pourrait) (y )?en (avoir|exister) (d'autres|plus|davantage)\b`, `\b(d'autres|davantage) (lignes |elements |resultats |commandes )?(existent|peuvent|pourraient|restent)\b`,
	`\bpas (tous|toutes|tout|chaque|l'ensemble)\b`, `\bn'(ai|avons|a|ont) pas (pu|reussi)\b`, `\bne (peux|peut|pouvons|pouvait|pourrait) pas\b`,
	`\bseulement (la |les |une )?(premi|partie|echantillon)`, `\bechantillon\b`, `\b\d[\d ,.]* sur (plus de|au moins) `, `\b(peuvent|pourraient|pourrait|peut|doit|doivent) manquer\b`, `\b(il )?manque (des|d'autres|encore)\b`,
	`\bqu'une partie\b`, `\bune partie (de|des|du)\b`, `\bd'autres pages\b`, `\bn'(ai|avons|a|ont) pas (encore )?(pu )?(recupere|charge|lu|parcouru|vu)`,
	`\ba change pendant\b`, `\blacunes?\b`, `\bminimum\b`, `\bpeut-etre (d'autres|plus|davantage)\b`,
}, "|"))

// notHedges are blanked before hedges are looked for: a bound that
// qualifies what is counted ("orders worth more than 100", "d'un montant
// de plus de 100"), the question's filter and not a hedge on the count;
// and a hedge word negated ("no gaps", "not a partial list", "no missing
// rows", "aucune lacune"), which asserts completeness.
var notHedges = regexp.MustCompile(strings.Join([]string{
	`\b(?:worth|costing|priced at|valued at|totall?ing|amounting to|d'un montant de|valant) (?:more|less|fewer|plus|moins) (?:than |de )?\d`,
	`\b(?:no|without|never any|zero) (?:gaps?|missing (?:rows|items|records|results|entries|pages|data))\b`,
	`\b(?:nothing|none|no (?:rows?|items?|records?|results?|entries|entry|pages?|data)) (?:is |are |was |were )?missing\b`,
	`\b(?:is |it's |this is |that is )?not (?:a |an )?(?:partial|incomplete|sample|subset)\b`,
	`\b(?:aucune|sans) lacunes?\b`, `\b(?:n'est|ce n'est) pas (?:une liste )?(?:partielle|incomplete)\b`, `\brien ne manque\b`,
}, "|"))

// partOf is "N of M" or "N sur M" with two different numbers: a share of a
// known whole, which says the rest was not fetched.
var partOf = regexp.MustCompile(`(\d[\d,.]*) (?:\p{L}+ )?(?:out of|of|sur|des|parmi) (?:the |les )?(\d[\d,.]*)\b`)

func hedged(s string) bool {
	s = notHedges.ReplaceAllString(s, " ")
	if hedges.MatchString(s) {
		return true
	}
	for _, m := range partOf.FindAllStringSubmatch(s, -1) {
		a, aok := parseNumber(m[1])
		b, bok := parseNumber(m[2])
		if aok && bok && a < b {
			return true
		}
	}
	return false
}

// unrelated are phrases whose universal claims nothing about data; they
// are blanked before universals are looked for.
var unrelated = regexp.MustCompile(strings.Join([]string{
	`\bthat'?s all\b`, `\bthat is all\b`, `\bit'?s all\b`, `\bis that all\b`, `\ball right\b`, `\bat all\b`, `\bafter all\b`,
	`\ball the best\b`, `\babove all\b`, `\ball in all\b`, `\bonce and for all\b`, `\ball set\b`, `\ball good\b`, `\ball clear\b`,
	`\bfirst of all\b`, `\bfor all i know\b`, `\ball along\b`, `\ball the time\b`, `\b(thanks|thank you|hi|hello) all\b`,
	`\ball of a sudden\b`, `\bbest of all\b`, `\bmost of all\b`, `\bfree for all\b`, `\ball ears\b`, `\bnot at all\b`,
	`\bevery (day|time|week|month|year|hour|minute|morning|evening|night|so often|now and then|other|few)\b`, `\beverytime\b`,
	`\bc'est tout\b`, `\bpas du tout\b`, `\bdu tout\b`, `\btout a fait\b`, `\btout de suite\b`, `\ben tout cas\b`, `\ben tout etat de cause\b`,
	`\btout d'abord\b`, `\bmalgre tout\b`, `\bavant tout\b`, `\bapres tout\b`, `\btout au plus\b`,
	`\b(tous|toutes) les (jours|mois|ans|deux|trois|semaines|heures|matins|soirs|fois|lundis|ans)\b`, `\b(merci|bonjour|salut) a tous\b`,
	`\bune fois pour toutes\b`, `\bde toutes? (facons?|manieres?)\b`, `\ba tous\b`,
	`\b(a )?chaque (fois|jour|semaine|mois|annee|matin|soir|heure)\b`,
	`\bno (idea|problem|worries|doubt)\b`, `\baucun(e)? (probleme|souci|idee|doute)\b`, `\bsans aucune?\b`,
}, "|"))

// universals are the strong claims that need no number.
var universals = regexp.MustCompile(strings.Join([]string{
	`\ball\b(?: (?:of )?(?:the |your |my |our |these |those |its |their )?(?:\d[\d,.]* )?[\p{L}-]+)?`, `\b(?:are|were|have|has been) all\b`, `\bthem all\b`,
	`\bevery \p{L}+`, `\beach of the\b(?: \d[\d,.]*)?(?: \p{L}+)?`, `\beverything\b`, `\bevery single\b`,
	`\b(?:complete|full|entire|whole|exhaustive|comprehensive) (?:list|set|count|inventory|overview|history|catalog(?:ue)?|picture|collection|export)\b`,
	`\b(?:is|are|looks|seems) (?:now )?(?:complete|exhaustive)\b`, `\bentire\b(?: \p{L}+)?`,
	`\bin total\b`, `\bin all\b`, `\ball told\b`, `\ba total of\b(?: \d[\d,.]*)?`, `\b(?:grand )?total(?:s|ling|ed)?\b(?: [\p{L}']+){0,4}:? [$€£]?\d[\d,.]*`, `\bexactly\b(?: \d[\d,.]*)?(?: \p{L}+)?`,
	`\btous\b(?: (?:les |ces |vos |mes |nos )?(?:\d[\d,.]* )?\p{L}+)?`, `\btoutes\b(?: (?:les |ces |vos |mes |nos )?(?:\d[\d,.]* )?\p{L}+)?`,
	`\bchaque \p{L}+`, `\bchacune?\b`, `\bl'ensemble (?:des|de|du)\b(?: \p{L}+)?`, `\bl'integralite\b`, `\bintegrale?\b`,
	`\bliste (?:complete|exhaustive|integrale|entiere)\b`, `\b(?:est|sont|semble) (?:maintenant )?(?:complete?s?|exhaustive?s?)\b`,
	`\b(?:head ?count|count|total count|number of \p{L}+|effectif|nombre (?:de |d')\p{L}+)\s*(?::|is|was|est de|est)?\s*\d[\d,.]*(?: \d{3})*`,
	`\bau total\b`, `\ben tout\b`, `\bentiere?s?\b(?: \p{L}+)?`, `\baucune?\b(?: \p{L}+)?`, `\bil n'y a (?:pas|plus) d(?:e |')\p{L}+`,
	`\b(?:there (?:are|is|were)|you have|we have|i found|has|have|had) no \p{L}+`, `\bnone of\b(?: (?:the|your|these|them) \p{L}+)?`, `\bexactement\b(?: \d[\d,.]*(?: \d{3})*)?(?: \p{L}+)?`, `\btotal(?:e|es|ise|isent)?\b(?: [\p{L}']+){0,5}:? \d[\d,.]*(?: \d{3})*`,
}, "|"))

// numberRe finds numbers: digits with thousands separators (1,234;
// 1 234; 1.234) and an optional decimal part, not glued to letters.
var numberRe = regexp.MustCompile(`\d{1,3}(?:[ ,.]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?`)

// notCounts are the words after a number that make it no count:
// durations, units, currencies, percentages, times, function words.
var notCounts = set(`% percent pourcent pour per x times fois
	ms s sec secs second seconds min mins minute minutes h hr hrs hour hours day days week weeks month months year years
	seconde secondes heure heures jour jours semaine semaines mois an ans annee annees am pm
	km m cm mm kg g mg l ml gb mb kb tb go mo ko to b bytes octets mi miles ft inch inches degrees degres °c °f °
	error errors erreur erreurs status statut code codes
	request requests requete requetes call calls appel appels page pages retry retries attempt attempts tentative tentatives step steps etape etapes
	$ € £ usd eur gbp chf cad dollars dollar euros euro cents cent k
	and or to of in on at for from by with than is are was were has have had be been am so more others other
	et ou a au aux de des du en sur par pour avec que qui est sont etait a ont avait
	january february march april may june july august september october november december
	jan feb mar apr jun jul aug sep sept oct nov dec
	janvier fevrier mars avril mai juin juillet aout septembre octobre novembre decembre
	st nd rd th er e eme`)

// notCountsBefore are the words before a number that make it a name, a
// date, a position or an amount, not a count.
var notCountsBefore = set(`# $ € £ n° no no. id ids number numero num ref ref page pages step etape version v rev
	order ticket invoice issue pr item user customer client commande facture article
	in since on until before after by en depuis le du au avant apres jusqu'au vers
	january february march april may june july august september october november december
	jan feb mar apr jun jul aug sep sept oct nov dec
	janvier fevrier mars avril mai juin juillet aout septembre octobre novembre decembre
	error erreur http status statut code
	top q rank line ligne room chapter section figure table row col column
	at first last premier premiere dernier derniere`)

// findClaims lists the claims of sentence orig, s being fold(orig).
func findClaims(orig, s string, calls []Call) []claim {
	var out []claim
	blank := unrelated.ReplaceAllStringFunc(s, func(m string) string { return strings.Repeat(" ", len(m)) })
	for _, loc := range universals.FindAllStringIndex(blank, -1) {
		m := blank[loc[0]:loc[1]]
		n := math.NaN()
		if d := numberRe.FindString(m); d != "" {
			n, _ = parseNumber(d)
		}
		out = append(out, claim{text: span(orig, s, loc[0], loc[1]), strong: true, number: n})
	}
	for _, loc := range numberRe.FindAllStringIndex(s, -1) {
		num := s[loc[0]:loc[1]]
		n, ok := parseNumber(num)
		if !ok {
			continue
		}
		before, after := s[:loc[0]], s[loc[1]:]
		if glued(before, after) {
			continue
		}
		if c := aggregateOf(n, num, calls); c != nil {
			out = append(out, claim{text: span(orig, s, loc[0], loc[1]+len(after)-len(strings.TrimPrefix(after, " "+firstWord(after)))), strong: true, number: n, agg: c})
			continue
		}
		next := firstWord(after)
		prev := lastWord(before)
		if next == "" || notCounts[next] || notCountsBefore[prev] || strings.HasPrefix(strings.TrimLeft(after, " "), "%") {
			continue
		}
		if !unicode.IsLetter([]rune(next)[0]) {
			continue
		}
		if y := int(n); float64(y) == n && y >= 1900 && y <= 2100 && !strings.ContainsAny(num, ",. ") && len(num) == 4 && monthNear(before) {
			continue
		}
		out = append(out, claim{text: span(orig, s, loc[0], loc[1]+len(after)-len(strings.TrimPrefix(after, " "+next))), number: n})
	}
	return out
}

// glued reports whether a number is part of a date, a time, a version,
// an identifier or an amount written with symbols ("2024-03-01", "10:30",
// "v2.1", "#42", "$30", "30€", "3rd").
func glued(before, after string) bool {
	if b := []rune(before); len(b) > 0 {
		switch r := b[len(b)-1]; {
		case unicode.IsLetter(r), r == '#', r == '$', r == '€', r == '£', r == '-', r == '/', r == ':', r == '_', r == '.', r == '+':
			return true
		}
		if len(b) > 1 && b[len(b)-1] == ' ' && strings.ContainsRune("$€£#", b[len(b)-2]) {
			return true
		}
	}
	if a := []rune(after); len(a) > 0 {
		switch r := a[0]; {
		case unicode.IsLetter(r), r == '-' && len(a) > 1 && unicode.IsDigit(a[1]), r == '/', r == ':', r == '€', r == '$', r == '£', r == '%', r == '_', r == '\'' && len(a) > 1 && unicode.IsLetter(a[1]):
			return true
		}
		if len(a) > 1 && a[0] == ' ' && strings.ContainsRune("€$£%", a[1]) {
			return true
		}
	}
	return false
}

var months = regexp.MustCompile(`\b(january|february|march|april|may|june|july|august|september|october|november|december|janvier|fevrier|mars|avril|mai|juin|juillet|aout|septembre|octobre|novembre|decembre|since|in|en|depuis|of|de)\s*(\d{1,2}\s*,?\s*)?$`)

func monthNear(before string) bool { return months.MatchString(before) }

func firstWord(s string) string {
	s = strings.TrimLeft(s, " ")
	end := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(",.;:!?()[]\"", r) })
	if end < 0 {
		end = len(s)
	}
	if end == 0 && s != "" {
		r := []rune(s)[0]
		return string(r)
	}
	return s[:end]
}

func lastWord(s string) string {
	s = strings.TrimRight(s, " ")
	start := strings.LastIndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(",;:!?()[]\"", r) })
	w := s[start+1:]
	if i := strings.LastIndex(w, "'"); i >= 0 && i < len(w)-1 {
		w = w[:i+1] // "l'"
	}
	return w
}

// aggregateOf returns the call whose aggregate holds number n (written as
// num, to its precision), if any.
func aggregateOf(n float64, num string, calls []Call) *Call {
	decimals := 0
	if i := strings.LastIndexAny(num, ".,"); i >= 0 && len(num)-i-1 != 3 {
		decimals = len(num) - i - 1
	}
	scale := math.Pow(10, float64(decimals))
	for i := range calls {
		a := calls[i].Aggregate
		if a == nil {
			continue
		}
		for _, g := range a.Groups {
			for _, v := range g.Values {
				f, err := strconv.ParseFloat(v, 64)
				if err == nil && math.Abs(math.Round(f*scale)/scale-n) < 1e-9 {
					return &calls[i]
				}
			}
		}
	}
	return nil
}

// parseNumber reads 1,234 / 1 234 / 1.234 (thousands) and 12.5 / 12,5
// (decimals).
func parseNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	digitsAfter := func(sep byte) int {
		i := strings.LastIndexByte(s, sep)
		if i < 0 {
			return -1
		}
		return len(s) - i - 1
	}
	s = strings.ReplaceAll(s, " ", "")
	switch {
	case strings.Count(s, ",")+strings.Count(s, ".") > 1:
		// Thousands with one kind, maybe a decimal with the other.
		last := strings.LastIndexAny(s, ".,")
		if digitsAfter(s[last]) == 3 && strings.Count(s, string(s[last])) > 1 {
			s = strings.NewReplacer(",", "", ".", "").Replace(s)
		} else {
			s = strings.NewReplacer(",", "", ".", "").Replace(s[:last]) + "." + s[last+1:]
		}
	case strings.Contains(s, ","):
		if digitsAfter(',') == 3 {
			s = strings.ReplaceAll(s, ",", "")
		} else {
			s = strings.ReplaceAll(s, ",", ".")
		}
	case strings.Contains(s, "."):
		if digitsAfter('.') == 3 && len(s) > 4 && s[0] != '0' {
			// "2.000" is two thousand in French; "1.500" is ambiguous
			// and read the same way, as a count would be.
			s = strings.ReplaceAll(s, ".", "")
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}
