package workspace

import (
	"bytes"
	"encoding/json"
	"errors"
)

// decodeStrict decodes a request's args into v, refusing unknown keys and trailing data.
func decodeStrict(raw []byte, v any) error {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}
