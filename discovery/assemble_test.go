package discovery

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/tools"
)

// summary describes a tool list compactly: a run of three or more tools
// of one toolkit is "toolkit×n", anything shorter is listed by name.
func summary(ts []*tools.Tool) []string {
	var out []string
	for i := 0; i < len(ts); {
		j := i
		for j < len(ts) && toolkitOf(ts[j]) == toolkitOf(ts[i]) {
			j++
		}
		if j-i >= 3 {
			out = append(out, fmt.Sprintf("%s×%d", toolkitOf(ts[i]), j-i))
		} else {
			for _, t := range ts[i:j] {
				out = append(out, t.Name)
			}
		}
		i = j
	}
	return out
}

type assembled struct {
	Direct, Pool, Meta []string
}

func summarise(a Assembly) assembled {
	return assembled{Direct: summary(a.Direct), Pool: summary(a.Pool), Meta: a.Meta}
}

// fakeTools makes n tools of one kind and provider (a toolkit for Kind app).
func fakeTools(kind tools.Kind, provider string, n int) []*tools.Tool {
	out := make([]*tools.Tool, n)
	for i := range out {
		name := fmt.Sprintf("%s_tool_%d", provider, i)
		t := &tools.Tool{ID: provider + "." + name, Provider: provider, Name: name, Kind: kind, Description: "A " + provider + " tool."}
		if kind == tools.KindApp {
			t.Toolkit = provider
		}
		out[i] = t
	}
	return out
}

var allMeta = []string{MetaSearchTools, MetaLoadTool, MetaListConnections, MetaConnectToolkit}

func TestAssemble(t *testing.T) {
	kits := demoKits(t)
	mail, crm, cal, chat := kits["mail"], kits["crm"], kits["calendar"], kits["chat"]
	if got := []int{len(chat), len(cal), len(crm), len(mail)}; !slices.Equal(got, []int{3, 8, 15, 70}) {
		t.Fatalf("demo toolkit sizes (chat, calendar, crm, mail) = %v; the cases below assume 3, 8, 15, 70", got)
	}
	kit := func(ts []*tools.Tool, m Mode) Entry { return Entry{Tools: ts, Toolkit: ts[0].Toolkit, Mode: m} }
	single := func(tl *tools.Tool, m Mode) Entry { return Entry{Tools: []*tools.Tool{tl}, Mode: m} }
	four := func(mailMode, crmMode, calMode, chatMode Mode) []Entry {
		return []Entry{kit(mail, mailMode), kit(crm, crmMode), kit(cal, calMode), kit(chat, chatMode)}
	}
	api := fakeTools(tools.KindAPI, "acme", 20)
	mcp := fakeTools(tools.KindMCP, "files", 4)
	alpha := fakeTools(tools.KindApp, "alpha", 3) // as large as chat, sorts before it

	tests := []struct {
		name    string
		entries []Entry
		loaded  []string
		opt     AssembleOptions
		want    assembled
	}{
		{
			name:    "default budget: chat (3) and calendar (8) fit, crm (15) does not, mail with it",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeAuto),
			want:    assembled{Direct: []string{"calendar×8", "chat×3"}, Pool: []string{"mail×70", "crm×15"}, Meta: allMeta},
		},
		{
			name:    "budget 11 is exactly chat and calendar",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeAuto),
			opt:     AssembleOptions{DirectBudget: 11},
			want:    assembled{Direct: []string{"calendar×8", "chat×3"}, Pool: []string{"mail×70", "crm×15"}, Meta: allMeta},
		},
		{
			name:    "budget 10: calendar no longer fits, so it and every larger toolkit is pooled",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeAuto),
			opt:     AssembleOptions{DirectBudget: 10},
			want:    assembled{Direct: []string{"chat×3"}, Pool: []string{"mail×70", "crm×15", "calendar×8"}, Meta: allMeta},
		},
		{
			name:    "budget 26 keeps crm too",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeAuto),
			opt:     AssembleOptions{DirectBudget: 26},
			want:    assembled{Direct: []string{"crm×15", "calendar×8", "chat×3"}, Pool: []string{"mail×70"}, Meta: allMeta},
		},
		{
			name:    "a budget large enough for everything leaves no pool and no search tools",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeAuto),
			opt:     AssembleOptions{DirectBudget: 96},
			want:    assembled{Direct: []string{"mail×70", "crm×15", "calendar×8", "chat×3"}, Meta: []string{MetaListConnections, MetaConnectToolkit}},
		},
		{
			name:    "negative budget pools every auto toolkit",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeDirect),
			opt:     AssembleOptions{DirectBudget: -1},
			want:    assembled{Direct: []string{"chat×3"}, Pool: []string{"mail×70", "crm×15", "calendar×8"}, Meta: allMeta},
		},
		{
			name:    "equal sizes are ordered by toolkit id: alpha is kept, chat is not",
			entries: append(four(ModeAuto, ModeAuto, ModeAuto, ModeAuto), Entry{Tools: alpha, Toolkit: "alpha"}),
			opt:     AssembleOptions{DirectBudget: 5},
			want:    assembled{Direct: []string{"alpha×3"}, Pool: []string{"mail×70", "crm×15", "calendar×8", "chat×3"}, Meta: allMeta},
		},
		{
			name:    "discovery false on mail: direct, and its 70 tools use up the budget",
			entries: four(ModeDirect, ModeAuto, ModeAuto, ModeAuto),
			want:    assembled{Direct: []string{"mail×70"}, Pool: []string{"crm×15", "calendar×8", "chat×3"}, Meta: allMeta},
		},
		{
			name:    "discovery false on crm: 15 counted, nothing else fits",
			entries: four(ModeAuto, ModeDirect, ModeAuto, ModeAuto),
			want:    assembled{Direct: []string{"crm×15"}, Pool: []string{"mail×70", "calendar×8", "chat×3"}, Meta: allMeta},
		},
		{
			name:    "discovery false on chat counts its 3; calendar still fits in the 12 left",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeDirect),
			want:    assembled{Direct: []string{"calendar×8", "chat×3"}, Pool: []string{"mail×70", "crm×15"}, Meta: allMeta},
		},
		{
			name:    "discovery true on calendar pools it; chat is kept, crm still does not fit in 12",
			entries: four(ModeAuto, ModeAuto, ModePooled, ModeAuto),
			want:    assembled{Direct: []string{"chat×3"}, Pool: []string{"mail×70", "crm×15", "calendar×8"}, Meta: allMeta},
		},
		{
			name:    "discovery true on chat frees room for crm? no: 8 + 15 > 15, crm is pooled",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModePooled),
			want:    assembled{Direct: []string{"calendar×8"}, Pool: []string{"mail×70", "crm×15", "chat×3"}, Meta: allMeta},
		},
		{
			name: "own API and MCP tools are never pooled and do not count, whatever their mode",
			entries: append([]Entry{{Tools: api, Mode: ModePooled}, {Tools: mcp}},
				four(ModeAuto, ModeAuto, ModeAuto, ModeAuto)...),
			want: assembled{Direct: []string{"acme×20", "files×4", "calendar×8", "chat×3"}, Pool: []string{"mail×70", "crm×15"}, Meta: allMeta},
		},
		{
			name:    "no connected app: no meta-tools",
			entries: []Entry{{Tools: api}, {Tools: mcp, Mode: ModePooled}},
			want:    assembled{Direct: []string{"acme×20", "files×4"}},
		},
		{
			name: "no bindings",
			want: assembled{},
		},
		{
			name:    "single mail tools bound one by one are sized together as mail (2)",
			entries: []Entry{single(mail[0], ModeAuto), kit(crm, ModeAuto), single(mail[3], ModeAuto)},
			want:    assembled{Direct: []string{"MAIL_LIST_MESSAGES", "MAIL_SEND_EMAIL"}, Pool: []string{"crm×15"}, Meta: allMeta},
		},
		{
			name:    "a tool bound twice appears once; discovery false on it wins over its toolkit's auto",
			entries: []Entry{kit(chat, ModeAuto), kit(mail, ModeAuto), single(mail[3], ModeDirect)},
			want:    assembled{Direct: []string{"chat×3", "MAIL_SEND_EMAIL"}, Pool: []string{"mail×69"}, Meta: allMeta},
		},
		{
			name:    "direct wins over pooled for a tool bound twice",
			entries: []Entry{single(chat[0], ModePooled), kit(chat, ModeDirect)},
			want:    assembled{Direct: []string{"chat×3"}, Meta: []string{MetaListConnections, MetaConnectToolkit}},
		},
		{
			name:    "loaded tools join Direct after the rest, in load order, without evicting anything",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeAuto),
			loaded:  []string{"crm.CRM_CREATE_NOTE", "mail.MAIL_UPDATE_VACATION_SETTINGS"},
			want: assembled{Direct: []string{"calendar×8", "chat×3", "CRM_CREATE_NOTE", "MAIL_UPDATE_VACATION_SETTINGS"},
				Pool: []string{"mail×70", "crm×15"}, Meta: allMeta},
		},
		{
			name:    "loaded ids that are not pooled are ignored, repeats count once",
			entries: four(ModeAuto, ModeAuto, ModeAuto, ModeAuto),
			loaded:  []string{"chat.CHAT_SEND_MESSAGE", "gone.GONE_TOOL", "mail.MAIL_SEND_EMAIL", "mail.MAIL_SEND_EMAIL"},
			want:    assembled{Direct: []string{"calendar×8", "chat×3", "MAIL_SEND_EMAIL"}, Pool: []string{"mail×70", "crm×15"}, Meta: allMeta},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Assemble(tc.entries, tc.loaded, tc.opt)
			if diff := cmp.Diff(tc.want, summarise(got)); diff != "" {
				t.Errorf("Assemble (-want +got):\n%s", diff)
			}
			again := Assemble(tc.entries, tc.loaded, tc.opt)
			if diff := cmp.Diff(summarise(got), summarise(again)); diff != "" {
				t.Errorf("a second Assemble differs (-first +second):\n%s", diff)
			}
		})
	}
}

// The assembly's direct app tools never exceed the budget, except for
// ModeDirect entries and loaded tools; every bound tool lands exactly once
// in Direct or Pool (a loaded one in both).
func TestAssembleInvariants(t *testing.T) {
	kits := demoKits(t)
	ids := []string{"calendar", "chat", "crm", "mail"}
	for budget := -1; budget <= 100; budget++ {
		for mask := 0; mask < 1<<len(ids); mask++ {
			var entries []Entry
			for i, id := range ids {
				m := ModeAuto
				if mask&(1<<i) != 0 {
					m = ModePooled
				}
				entries = append(entries, Entry{Tools: kits[id], Toolkit: id, Mode: m})
			}
			a := Assemble(entries, nil, AssembleOptions{DirectBudget: budget})
			limit := budget
			if budget == 0 {
				limit = DefaultDirectBudget
			}
			if len(a.Direct) > max(limit, 0) {
				t.Fatalf("budget %d, mask %b: %d direct tools", budget, mask, len(a.Direct))
			}
			if len(a.Direct)+len(a.Pool) != 96 {
				t.Fatalf("budget %d, mask %b: %d direct + %d pooled, want 96", budget, mask, len(a.Direct), len(a.Pool))
			}
			// Whole toolkits only.
			where := map[string]string{}
			for _, tl := range a.Direct {
				where[tl.Toolkit] += "d"
			}
			for _, tl := range a.Pool {
				where[tl.Toolkit] += "p"
			}
			for kit, w := range where {
				if strings.Contains(w, "d") && strings.Contains(w, "p") {
					t.Fatalf("budget %d, mask %b: toolkit %s is split", budget, mask, kit)
				}
			}
		}
	}
}

func TestAssembleDoesNotModifyInput(t *testing.T) {
	kits := demoKits(t)
	entries := []Entry{{Tools: kits["mail"], Toolkit: "mail"}, {Tools: kits["chat"], Toolkit: "chat"}}
	before := names(entries[0].Tools)
	loaded := []string{"mail.MAIL_SEND_EMAIL"}
	a := Assemble(entries, loaded, AssembleOptions{})
	a.Direct[0] = nil
	a.Pool[0] = nil
	if diff := cmp.Diff(before, names(entries[0].Tools)); diff != "" {
		t.Errorf("entries changed (-before +after):\n%s", diff)
	}
	if len(entries) != 2 || entries[1].Tools[0] == nil {
		t.Error("entries changed")
	}
}

func TestModeString(t *testing.T) {
	got := []string{ModeAuto.String(), ModePooled.String(), ModeDirect.String(), Mode(7).String()}
	if diff := cmp.Diff([]string{"auto", "pooled", "direct", "Mode(7)"}, got); diff != "" {
		t.Error(diff)
	}
}
