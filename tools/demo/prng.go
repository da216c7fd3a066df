package demo

// prng is a splitmix64 generator. It is written out here rather than taken
// from math/rand so that the generated data stays byte-identical across Go
// releases: tests and recorded demo conversations depend on it.
type prng struct{ s uint64 }

func newPRNG(seed uint64) *prng { return &prng{s: seed} }

func (p *prng) next() uint64 {
	p.s += 0x9e3779b97f4a7c15
	z := p.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a value in [0, n); n must be positive.
func (p *prng) intn(n int) int { return int(p.next() % uint64(n)) }

// between returns a value in [lo, hi].
func (p *prng) between(lo, hi int) int { return lo + p.intn(hi-lo+1) }

// chance reports true with probability pct/100.
func (p *prng) chance(pct int) bool { return p.intn(100) < pct }

func pick[T any](p *prng, xs []T) T { return xs[p.intn(len(xs))] }

// weighted picks xs[i] with probability weights[i]/sum(weights).
func weighted[T any](p *prng, xs []T, weights []int) T {
	sum := 0
	for _, w := range weights {
		sum += w
	}
	n := p.intn(sum)
	for i, w := range weights {
		if n < w {
			return xs[i]
		}
		n -= w
	}
	return xs[len(xs)-1]
}

var firstNames = []string{
	"Ava", "Liam", "Olivia", "Noah", "Emma", "Mateo", "Sophia", "Lucas", "Isabella", "Ethan",
	"Mia", "Amir", "Chloe", "Kenji", "Priya", "Diego", "Hannah", "Tomás", "Zara", "Felix",
	"Leila", "Jonas", "Grace", "Ravi", "Nora", "Samuel", "Ines", "Oscar", "Maya", "Elias",
	"Clara", "Hugo", "Aisha", "Marco", "Sara", "Daniel", "Yuki", "Lena", "Omar", "Julia",
	"Theo", "Freya", "Arjun", "Camille", "Wei", "Fatima", "Lars", "Rosa", "Ibrahim", "Alice",
	"Mohammed", "Elena", "Sven", "Nadia", "Pablo", "Ingrid", "Kwame", "Lucia", "Jakob", "Mei",
}

var lastNames = []string{
	"Smith", "Garcia", "Müller", "Rossi", "Nguyen", "Kowalski", "Johansson", "Patel", "Kim", "Silva",
	"Dubois", "Okafor", "Tanaka", "Novak", "Hansen", "Costa", "Schmidt", "Ahmed", "Lopez", "Brown",
	"Fischer", "Moreau", "Yilmaz", "Jensen", "Ivanova", "Haddad", "O'Brien", "Chen", "Andersen", "Varga",
	"Lindqvist", "Romero", "Sato", "Wójcik", "Bianchi", "Mensah", "Fernández", "Weber", "Nakamura", "Keller",
	"Murphy", "Rahman", "Petrov", "Laurent", "Ortiz", "Berg", "Kaur", "Walsh", "Marino", "Dahl",
}

var companies = []string{
	"Initech", "Globex", "Umbrella Logistics", "Hooli", "Vandelay Industries", "Stark Freight",
	"Wayne Outfitters", "Soylent Foods", "Cyberdyne Analytics", "Tyrell Biotech", "Wonka Confectionery",
	"Pied Piper", "Aperture Labs", "Massive Dynamic", "Oscorp Energy", "Gringotts Capital",
	"Monarch Travel", "Dunder Paper", "Blue Sun Retail", "Nakatomi Trading", "Virtucon", "Prestige Worldwide",
	"Sterling Cooper", "Bluth Homes", "Los Pollos Supply", "Krusty Kitchens", "Rekall Media", "Duff Beverages",
	"Gekko & Co", "Planet Express", "Ollivander Woodworks", "Acme Northwind", "Contoso Health", "Fabrikam",
	"Tailspin Toys", "Litware", "Adventure Works", "Lucerne Publishing", "Proseware", "Wide World Importers",
}

type place struct{ City, Country string }

var places = []place{
	{"Lisbon", "PT"}, {"Porto", "PT"}, {"Berlin", "DE"}, {"Munich", "DE"}, {"Paris", "FR"}, {"Lyon", "FR"},
	{"Madrid", "ES"}, {"Barcelona", "ES"}, {"Amsterdam", "NL"}, {"Rotterdam", "NL"}, {"London", "GB"},
	{"Manchester", "GB"}, {"Dublin", "IE"}, {"Stockholm", "SE"}, {"Copenhagen", "DK"}, {"Oslo", "NO"},
	{"Vienna", "AT"}, {"Zurich", "CH"}, {"Milan", "IT"}, {"Rome", "IT"}, {"New York", "US"},
	{"Austin", "US"}, {"Seattle", "US"}, {"Chicago", "US"}, {"Toronto", "CA"}, {"Montreal", "CA"},
	{"Mexico City", "MX"}, {"São Paulo", "BR"}, {"Tokyo", "JP"}, {"Singapore", "SG"}, {"Sydney", "AU"},
	{"Cape Town", "ZA"},
}

// emailLocal turns a person's name into the local part of an address.
func emailLocal(first, last string) string {
	b := make([]rune, 0, len(first)+len(last)+1)
	for _, r := range first + "." + last {
		switch {
		case r >= 'A' && r <= 'Z':
			b = append(b, r+('a'-'A'))
		case r >= 'a' && r <= 'z', r == '.':
			b = append(b, r)
		case r == 'ü':
			b = append(b, 'u')
		case r == 'ó':
			b = append(b, 'o')
		case r == 'á':
			b = append(b, 'a')
		case r == 'é':
			b = append(b, 'e')
		}
	}
	return string(b)
}

// domainOf turns a company name into a mail domain.
func domainOf(company string) string {
	b := make([]rune, 0, len(company))
	for _, r := range company {
		switch {
		case r >= 'A' && r <= 'Z':
			b = append(b, r+('a'-'A'))
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b = append(b, r)
		}
	}
	return string(b) + ".example"
}
