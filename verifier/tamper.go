package verifier

import (
	"encoding/json"
	"errors"
	"fmt"
)

// tamper alters the proof in memory, as SPEC.md §4 rule 3 asks, and requires
// the signature stage to reject the result. The payload is changed after
// decoding and then re-encoded, so the change is to signed bytes and cannot
// hide in base64 padding bits.
func tamper(r *Report, rel *release) (string, error) {
	altered, where, err := alterPayload(rel.proof)
	if err != nil {
		return "", fmt.Errorf("could not alter the artifact: %v", err)
	}
	copied := *rel
	copied.proof = altered
	sub := &Report{}
	defer func() {
		r.Timing.Signatures += sub.Timing.Signatures
		r.Timing.SignatureTime += sub.Timing.SignatureTime
	}()
	if checkSignatures(sub, &copied) {
		return "", fmt.Errorf("the artifact with payload byte %d altered was accepted", where)
	}
	return fmt.Sprintf("payload byte %d altered: rejected by %s", where, sub.Failed().ID), nil
}

// alterPayload changes the byte at len/2, or the next ASCII letter or digit
// after it, so that the JSON stays well-formed and only the signature can
// catch the change.
func alterPayload(proof []byte) ([]byte, int, error) {
	var encoded string
	var rebuild func(payload string) ([]byte, error)
	if protected, payload, signature, ok := fastFlattened(proof); ok {
		// The bytes json.Marshal writes for the decoded object: members
		// sorted, and base64url needs no escaping.
		encoded = string(payload)
		rebuild = func(payload string) ([]byte, error) {
			return []byte(`{"payload":"` + payload + `","protected":"` + string(protected) + `","signature":"` + string(signature) + `"}`), nil
		}
	} else {
		doc, err := parseObject(proof)
		if err != nil {
			return nil, 0, err
		}
		var ok bool
		if encoded, ok = doc["payload"].(string); !ok {
			return nil, 0, errors.New("no payload")
		}
		rebuild = func(payload string) ([]byte, error) {
			doc["payload"] = payload
			return json.Marshal(doc)
		}
	}
	payload, err := decodeB64(encoded)
	if err != nil || len(payload) == 0 {
		return nil, 0, errors.New("payload is not base64url")
	}
	for k := range payload {
		i := (len(payload)/2 + k) % len(payload)
		c := payload[i]
		switch {
		case c >= '0' && c <= '9':
			payload[i] = '0' + (c-'0'+1)%10
		case c >= 'a' && c <= 'z':
			payload[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z':
			payload[i] = c - 'A' + 'a'
		default:
			continue
		}
		out, err := rebuild(b64(payload))
		return out, i, err
	}
	return nil, 0, errors.New("payload has no letter or digit")
}
