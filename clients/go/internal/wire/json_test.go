package wire

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Free-form objects decode with goccy/go-json: they must read exactly as encoding/json reads
// them, which is what ADK Go and the other clients' tests assume.
func TestUnmarshalObjectReadsAsEncodingJSON(t *testing.T) {
	for _, text := range []string{
		`{"turn":517}`,
		`{"a":1,"a":2}`,
		`{"s":"\u00e9\ud83d\ude00\n\"\\/","lone":"\ud800"}`,
		"{\"bad\":\"\xff\"}",
		`{"n":-0,"f":1.5e3,"g":0.1,"big":12345678901234567890}`,
		`{"x":[1,{"y":null},[]],"b":true,"o":{}}`,
		` {"spaced" : 1 } `,
		`{}`,
		`null`,
		`[1]`,
		`"s"`,
		`{"a":1}x`,
		`{"a":}`,
		`{"a":1,}`,
		`{"a":01}`,
		`{"a":"\x"}`,
		"{\"tab\":\"a\tb\"}",
		`{"n":1e400}`,
	} {
		got, gotErr := unmarshalObject("field", text)
		var want map[string]any
		wantErr := json.Unmarshal([]byte(text), &want)
		if wantErr != nil {
			if gotErr == nil {
				t.Errorf("%s: read as %v, want an error like %q", text, got, wantErr)
			}
			continue
		}
		if gotErr != nil {
			t.Errorf("%s: %v, want %v", text, gotErr, want)
		} else if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-encoding/json +got)\n%s", text, diff)
		}
	}
}
