package request

import (
	"bytes"
	"encoding/json"
	"errors"
)

// DecodeArgs decodes the request's args into v, refusing unknown keys and trailing data. The
// argument rules themselves are the kind's SQL validator's (checked at insert time, and the args
// of a row cannot change afterwards): this only maps the validated JSON onto the handler's type.
func DecodeArgs(req *Request, v any) error {
	if err := DecodeStrict(req.Args, v); err != nil {
		return Refusef("%s: bad arguments: %v", req.Kind, err)
	}
	return nil
}

// DecodeStrict unmarshals a JSON object into v, refusing unknown keys and trailing data; empty
// input is the empty object.
func DecodeStrict(raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
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
