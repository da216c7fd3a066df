package demo

import (
	"encoding/json"
	"strings"
	"testing"
)

// pageOfTool calls a list tool and returns its primary array (the one
// array-valued top-level key) and its continuation token, wherever this
// vendor puts it.
func pageOfTool(t *testing.T, m manifest, tool manifestTool, args map[string]any) ([]json.RawMessage, string) {
	t.Helper()
	status, body := invoke(t, m, tool, args)
	if status != 200 {
		t.Fatalf("%s %v: %d %s", tool.Name, args, status, body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("%s: %v", tool.Name, err)
	}
	var items []json.RawMessage
	found := 0
	for _, v := range top {
		if len(v) > 0 && v[0] == '[' {
			found++
			json.Unmarshal(v, &items)
		}
	}
	if found != 1 {
		t.Fatalf("%s: %d top-level arrays in %s", tool.Name, found, body)
	}
	var cont struct {
		NextPageToken    string `json:"nextPageToken"`
		ResponseMetadata struct {
			NextCursor string `json:"next_cursor"`
		} `json:"response_metadata"`
		Paging struct {
			Next struct {
				After string `json:"after"`
			} `json:"next"`
		} `json:"paging"`
	}
	json.Unmarshal(body, &cont)
	return items, cont.NextPageToken + cont.ResponseMetadata.NextCursor + cont.Paging.Next.After
}

// TestListToolsPaginate walks every paginated list tool of every toolkit
// with a small page size and checks it yields the same items, in the same
// order, as a walk with the largest page size — and that lists are not
// empty.
func TestListToolsPaginate(t *testing.T) {
	_, ts := serve(t, Options{})
	shared, _ := sampleArgs(t, ts.URL)
	ms := loadManifests(t, ts.URL)
	walked := 0
	for _, key := range []string{"mail", "chat", "crm", "calendar"} {
		for _, tool := range ms[key].Tools {
			if tool.HTTP.Method != "GET" || !(strings.Contains(tool.Name, "_LIST_") || strings.Contains(tool.Name, "_SEARCH_")) {
				continue
			}
			props := tool.InputSchema.Properties
			sizeArg, tokenArg := "", ""
			for _, n := range []string{"maxResults", "limit"} {
				if props[n] != nil {
					sizeArg = n
				}
			}
			for _, n := range []string{"pageToken", "cursor", "after"} {
				if props[n] != nil {
					tokenArg = n
				}
			}
			if sizeArg == "" || tokenArg == "" {
				if tool.Name != "CRM_LIST_PIPELINES" {
					t.Errorf("%s: list tool without page size and token arguments", tool.Name)
				}
				continue
			}
			walk := func(size int) []string {
				var out []string
				token := ""
				for range 1000 {
					args := map[string]any{sizeArg: itoa(size)}
					for _, r := range tool.InputSchema.Required {
						args[r] = shared[r]
					}
					if token != "" {
						args[tokenArg] = token
					}
					items, next := pageOfTool(t, ms[key], tool, args)
					if len(items) > size {
						t.Fatalf("%s: %d items for a page of %d", tool.Name, len(items), size)
					}
					for _, it := range items {
						out = append(out, string(it))
					}
					if next == "" {
						return out
					}
					token = next
				}
				t.Fatalf("%s: walk does not end", tool.Name)
				return nil
			}
			maxSize := int(props[sizeArg]["maximum"].(float64))
			all := walk(maxSize)
			if len(all) == 0 {
				t.Errorf("%s returns no data", tool.Name)
				continue
			}
			small := walk(max(1, len(all)/4))
			if strings.Join(small, "\n") != strings.Join(all, "\n") {
				t.Errorf("%s: a walk with pages of %d differs from one with pages of %d (%d vs %d items)",
					tool.Name, max(1, len(all)/4), maxSize, len(small), len(all))
			}
			walked++
		}
	}
	if walked < 20 {
		t.Errorf("only %d list tools walked", walked)
	}
}

func TestMailMessagesWalk(t *testing.T) {
	_, ts := serve(t, Options{})
	var profile struct {
		MessagesTotal int `json:"messagesTotal"`
	}
	getJSON(t, ts.URL+"/mail/profile", &profile)
	var seen []item
	token := ""
	pages := 0
	for {
		var page messageList
		u := ts.URL + "/mail/messages?includeSpamTrash=true&maxResults=40"
		if token != "" {
			u += "&pageToken=" + token
		}
		getJSON(t, u, &page)
		pages++
		for _, m := range page.Messages {
			seen = append(seen, item{m.ID})
		}
		if page.ResultSizeEstimate != profile.MessagesTotal {
			t.Errorf("resultSizeEstimate %d, profile says %d", page.ResultSizeEstimate, profile.MessagesTotal)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	unique, dups := ids(seen)
	if len(seen) != profile.MessagesTotal || len(unique) != len(seen) || dups != 0 || profile.MessagesTotal < 300 {
		t.Errorf("walked %d messages (%d repeated) in %d pages; mailbox has %d", len(seen), dups, pages, profile.MessagesTotal)
	}
}

func TestChatLongConversation(t *testing.T) {
	_, ts := serve(t, Options{})
	var convs struct {
		Conversations []chatConversation `json:"conversations"`
	}
	getJSON(t, ts.URL+"/chat/conversations?limit=100", &convs)
	long := 0
	for _, c := range convs.Conversations {
		var n int
		cursor := ""
		for {
			var page struct {
				Messages         []chatMessage    `json:"messages"`
				HasMore          bool             `json:"has_more"`
				ResponseMetadata responseMetadata `json:"response_metadata"`
			}
			getJSON(t, withQuery(ts.URL+"/chat/conversations/"+c.ID+"/messages", "limit", "100", "cursor", cursor), &page)
			n += len(page.Messages)
			if page.HasMore != (page.ResponseMetadata.NextCursor != "") {
				t.Fatalf("%s: has_more %v with next_cursor %q", c.ID, page.HasMore, page.ResponseMetadata.NextCursor)
			}
			if cursor = page.ResponseMetadata.NextCursor; cursor == "" {
				break
			}
		}
		if n > 100 {
			long++
		}
	}
	if long == 0 {
		t.Error("no conversation needs more than one page at the largest page size")
	}
}
