package omstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The shared vectors (../../schemas/vectors): every client validates the valid ones, reproduces their canonical
// bytes from its own typed value, refuses the invalid ones, and partitions keys like the Java client.

var vectors = filepath.Join("..", "..", "schemas", "vectors")

type vector struct {
	Name   string `json:"name"`
	Schema string `json:"schema"`
	Reason string `json:"reason"`
}

func readIndex(t *testing.T) (valid, invalid []vector) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectors, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index struct{ Valid, Invalid []vector }
	if err := json.Unmarshal(data, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Valid) < 40 || len(index.Invalid) < 40 {
		t.Fatalf("too few vectors: %d valid, %d invalid", len(index.Valid), len(index.Invalid))
	}
	return index.Valid, index.Invalid
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectors, path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestValidVectorsDecodeIntoTheTypesAndReserialiseToTheirCanonicalBytes(t *testing.T) {
	valid, _ := readIndex(t)
	for _, v := range valid {
		t.Run(v.Name, func(t *testing.T) {
			newValue, ok := PayloadTypes[v.Schema]
			if !ok {
				t.Fatalf("no Go type for %s", v.Schema)
			}
			canonical := read(t, "valid/"+v.Name+".canonical.json")
			for _, raw := range [][]byte{read(t, "valid/"+v.Name+".json"), canonical} {
				typed := newValue()
				if err := Decode(v.Schema, raw, typed); err != nil {
					t.Fatalf("refused: %v", err)
				}
				got, err := EncodeCanonical(v.Schema, typed)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, canonical) {
					t.Fatalf("canonical bytes differ\n got: %s\nwant: %s", got, canonical)
				}
			}
		})
	}
}

func TestInvalidVectorsAreRefused(t *testing.T) {
	_, invalid := readIndex(t)
	for _, v := range invalid {
		t.Run(v.Name, func(t *testing.T) {
			newValue, ok := PayloadTypes[v.Schema]
			if !ok {
				t.Fatalf("no Go type for %s", v.Schema)
			}
			raw := read(t, "invalid/"+v.Name+".json")
			var contractErr *ContractError
			// the schema itself refuses it, not only the Go type (an unknown field is also refused by decoding)
			if _, err := Validate(v.Schema, raw); !errors.As(err, &contractErr) {
				t.Fatalf("the schema accepts it, but must refuse it: %s (err=%v)", v.Reason, err)
			}
			if err := Decode(v.Schema, raw, newValue()); !errors.As(err, &contractErr) {
				t.Fatalf("accepted, but must be refused: %s (err=%v)", v.Reason, err)
			}
		})
	}
}

func TestThePartitionerIsJavasMurmur2ForEverySharedCase(t *testing.T) {
	var cases struct {
		Cases []struct {
			Key        string `json:"key"`
			Partitions int    `json:"partitions"`
			Partition  int    `json:"partition"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(read(t, "partitions.json"), &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases.Cases) < 50 {
		t.Fatalf("only %d cases", len(cases.Cases))
	}
	for _, c := range cases.Cases {
		if got := PartitionFor(c.Key, c.Partitions); got != c.Partition {
			t.Errorf("key %q over %d partitions: got %d, want %d", c.Key, c.Partitions, got, c.Partition)
		}
	}
}

func TestCanonicalNumbersAndKeyOrder(t *testing.T) {
	cases := map[string]string{"0": "0", "-0": "0", "1E21": "1e+21", "1e-7": "1e-7", "0.000001": "0.000001",
		"5e-324": "5e-324", "1.7976931348623157e308": "1.7976931348623157e+308", "100e-2": "1",
		"9007199254740991": "9007199254740991", "333333333.33333329": "333333333.3333333", "1e20": "100000000000000000000"}
	for in, want := range cases {
		got, err := Canonicalize(json.Number(in))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s (%v), want %s", in, got, err, want)
		}
	}
	got, _ := Canonicalize(map[string]any{"\ue000": 1.0, "😀": 2.0, "a": 3.0})
	if string(got) != `{"a":3,"😀":2,"`+"\ue000"+`":1}` {
		t.Errorf("UTF-16 order: %s", got)
	}
	if NormalDateTime("2026-03-01T09:00:00.1234569-00:00") != "2026-03-01T09:00:00.123456Z" {
		t.Error("date-time normal form")
	}
}
