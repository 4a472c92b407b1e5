package wire

import "testing"

func TestRenameJSONKeys(t *testing.T) {
	for _, tt := range []struct{ in, snake string }{
		{`{"promptTokenCount":3}`, `{"prompt_token_count":3}`},
		{`{"a": {"webSearchQueries" :["someValue", "x:y"]}}`, `{"a": {"web_search_queries" :["someValue", "x:y"]}}`},
		{`{"quoteKey":"a \"valueLike\": b","list":[{"innerKey":null}]}`, `{"quote_key":"a \"valueLike\": b","list":[{"inner_key":null}]}`},
		{`"plainString"`, `"plainString"`},
	} {
		if got := string(renameJSONKeys([]byte(tt.in), snakeKey)); got != tt.snake {
			t.Errorf("snake of %s = %s, want %s", tt.in, got, tt.snake)
		}
		if got := string(renameJSONKeys([]byte(tt.snake), camelKey)); got != tt.in {
			t.Errorf("camel of %s = %s, want %s", tt.snake, got, tt.in)
		}
	}
}
