// Command syncschemas copies the published schemas (../../schemas) into this module, which embeds them.
// Run it with `go generate ./...` after `om-stream schemas export`; a test fails while the copies differ.
package main

import (
	"encoding/json"
	"log"
	"os"
	"path/filepath"
)

func main() {
	source := filepath.Join("..", "..", "schemas")
	target := "schemas"
	raw, err := os.ReadFile(filepath.Join(source, "index.json"))
	if err != nil {
		log.Fatal(err)
	}
	var index struct {
		Schemas []struct {
			File string `json:"file"`
		} `json:"schemas"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		log.Fatal(err)
	}
	if err := os.RemoveAll(target); err != nil {
		log.Fatal(err)
	}
	files := []string{"index.json"}
	for _, s := range index.Schemas {
		files = append(files, s.File)
	}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(source, file))
		if err != nil {
			log.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(target, file)), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(target, file), data, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("synced %d schemas", len(index.Schemas))
}
