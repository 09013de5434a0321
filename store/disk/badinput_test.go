package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cohort-dev/cohort/store"
)

func TestOpenRejectsBadDirectories(t *testing.T) {
	t.Run("empty Dir", func(t *testing.T) {
		if _, err := Open(Options{}); err == nil {
			t.Fatal("Open with no Dir succeeded")
		}
	})
	t.Run("not a store", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Options{Dir: dir})
		if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "notes.txt") {
			t.Fatalf("Open = %v, want ErrNotStore naming notes.txt", err)
		}
		// Nothing was written into the foreign directory, nor was the
		// lock file of the refused Open left there.
		names := dirNames(t, dir)
		if !slices.Equal(names, []string{"notes.txt"}) {
			t.Fatalf("directory now holds %v", names)
		}
	})
	t.Run("a file, not a directory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(Options{Dir: path}); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open(file) = %v, want an error naming it", err)
		}
	})
	t.Run("foreign marker", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, markerName), []byte("something else"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Options{Dir: dir})
		if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), markerName) {
			t.Fatalf("Open = %v, want ErrStorage naming %s", err, markerName)
		}
	})
	t.Run("locked", func(t *testing.T) {
		dir := t.TempDir()
		s := openT(t, Options{Dir: dir})
		defer s.Close()
		_, err := Open(Options{Dir: dir})
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "LOCK") {
			t.Fatalf("second Open = %v, want ErrLocked naming the LOCK file", err)
		}
		// The first store is unaffected.
		if err := s.Append(context.Background(), 0, []store.Record{rec("k", "v")}); err != nil {
			t.Fatalf("Append on the first store: %v", err)
		}
	})
	t.Run("interrupted first start", func(t *testing.T) {
		// Only the marker was written before the crash: Open creates the
		// store rather than refusing it.
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, markerName), []byte(markerContent), 0o644); err != nil {
			t.Fatal(err)
		}
		s := openT(t, Options{Dir: dir})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// state is the contents of a store: partition → key → value.
type state map[int32]map[string]string

func (s state) clone() state {
	c := state{}
	for p, kv := range s {
		c[p] = map[string]string{}
		for k, v := range kv {
			c[p][k] = v
		}
	}
	return c
}

func (s state) equal(o state) bool {
	for p := range mergeKeys(s, o) {
		if len(s[p]) != len(o[p]) {
			return false
		}
		for k, v := range s[p] {
			if g, ok := o[p][k]; !ok || g != v {
				return false
			}
		}
	}
	return true
}

func mergeKeys(a, b state) map[int32]bool {
	m := map[int32]bool{}
	for p := range a {
		m[p] = true
	}
	for p := range b {
		m[p] = true
	}
	return m
}

// damagedStore builds a store whose data is partly in sstables and partly
// (overwrites and deletions of half the keys) only in the WAL. It returns a
// copy of the directory taken while the store was open (a crash image) or
// after Close, and the states after each Append: states[i] is the contents
// after i Appends. The sstables hold the first `flushed` Appends.
func damagedStore(t *testing.T, crash bool) (dir string, states []state, flushed int) {
	live := t.TempDir()
	s := openT(t, Options{Dir: live})
	ctx := context.Background()
	cur := state{}
	states = []state{cur.clone()}
	put := func(round int) {
		for p := int32(0); p < 4; p++ {
			if cur[p] == nil {
				cur[p] = map[string]string{}
			}
			var recs []store.Record
			for k := 0; k < 200; k++ {
				key := fmt.Sprintf("key-%03d", k)
				switch {
				case round > 0 && k%2 == 0:
					continue // only half of the keys change in later rounds
				case round > 0 && k%3 == 0:
					recs = append(recs, store.Record{Key: []byte(key)})
					delete(cur[p], key)
				default:
					v := fmt.Sprintf("round %d partition %d key %d %s", round, p, k, strings.Repeat("x", k%50))
					recs = append(recs, rec(key, v))
					cur[p][key] = v
				}
			}
			if err := s.Append(ctx, p, recs); err != nil {
				t.Fatal(err)
			}
			states = append(states, cur.clone())
		}
	}
	put(0)
	if err := s.Compact(ctx); err != nil { // round 0 goes to sstables
		t.Fatal(err)
	}
	flushed = len(states) - 1
	put(1)
	if crash {
		dir = copyDir(t, live) // every Append was synced: this is what a crash leaves
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !crash {
		dir = copyDir(t, live)
	}
	return dir, states, flushed
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range dirNames(t, src) {
		if name == "LOCK" {
			continue
		}
		in, err := os.Open(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestDamagedFiles damages each of the store's files in a copy (bytes
// flipped in the middle, or the file cut in half) and checks that the store
// either reports an ErrStorage error that names the damaged file and says
// what to do, or returns all the data: never a silent loss.
//
// One exception is inherent to write-ahead logging: damage to the last WAL
// of a crashed store can look like the torn tail a crash leaves (pebble
// stops replaying there without an error; it reports an error only when
// the damage cannot be a torn tail). Recovery then keeps the Appends before
// the damage, and the test requires exactly that: a prefix of the Appends,
// never less than what the sstables hold, never reordered or garbled data.
// After a clean Close the WAL holds no data that is not also in sstables
// (Close flushes), so there damage to the WAL loses nothing.
func TestDamagedFiles(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "after Close"
		if crash {
			name = "crash image"
		}
		t.Run(name, func(t *testing.T) { testDamagedFiles(t, crash) })
	}
}

func testDamagedFiles(t *testing.T, crash bool) {
	orig, states, flushed := damagedStore(t, crash)
	want := states[len(states)-1]
	kinds := map[string]*regexp.Regexp{
		"sstable":  regexp.MustCompile(`^\d+\.sst$`),
		"WAL":      regexp.MustCompile(`^\d+\.log$`),
		"MANIFEST": regexp.MustCompile(`^MANIFEST-\d+$`),
	}
	seen := map[string]bool{}
	for _, name := range dirNames(t, orig) {
		var kind string
		for k, re := range kinds {
			if re.MatchString(name) {
				kind = k
			}
		}
		if kind == "" {
			continue
		}
		seen[kind] = true
		fileNum := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "MANIFEST-"), ".sst"), ".log")
		for _, damage := range []string{"flip", "truncate"} {
			t.Run(kind+"/"+name+"/"+damage, func(t *testing.T) {
				dir := copyDir(t, orig)
				path := filepath.Join(dir, name)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if len(data) == 0 {
					t.Skipf("%s is empty", name)
				}
				if damage == "flip" {
					for i := len(data) / 2; i < len(data)/2+8 && i < len(data); i++ {
						data[i] ^= 0x5a
					}
				} else {
					data = data[:len(data)/2]
				}
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				got, err := openAndLoad(dir, want)
				if err != nil {
					// The message without the directory, which is named after the test.
					msg := strings.ReplaceAll(err.Error(), dir, "DIR")
					switch {
					case !errors.Is(err, ErrStorage):
						t.Fatalf("%s of %s: error does not wrap ErrStorage: %v", damage, name, err)
					case !strings.Contains(msg, fileNum) && !strings.Contains(msg, "wal "+strings.TrimLeft(fileNum, "0")):
						t.Fatalf("%s of %s: error does not name the file: %s", damage, name, msg)
					case !strings.Contains(msg, "move it aside"):
						t.Fatalf("%s of %s: error does not say what to do: %s", damage, name, msg)
					}
					t.Logf("%s of %s: %s", damage, name, msg)
					return
				}
				if got.equal(want) {
					t.Logf("%s of %s: no data lost", damage, name)
					return
				}
				if crash && kind == "WAL" {
					for i := len(states) - 1; i >= flushed; i-- {
						if got.equal(states[i]) {
							t.Logf("%s of %s: recovered the first %d of %d Appends, as after a crash", damage, name, i, len(states)-1)
							return
						}
					}
				}
				t.Fatalf("%s of %s: silent damage: the store opened and loaded without error but its contents differ", damage, name)
			})
		}
	}
	for k := range kinds {
		if !seen[k] {
			t.Errorf("the store has no %s file to damage", k)
		}
	}
}

// openAndLoad opens dir and loads the partitions of want.
func openAndLoad(dir string, want state) (state, error) {
	s, err := Open(Options{Dir: dir, Logger: discard})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	got := state{}
	for p := range want {
		got[p] = map[string]string{}
		err := s.Load(context.Background(), p, func(r store.Record) error {
			got[p][string(r.Key)] = string(r.Value)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return got, nil
}

// A table the MANIFEST lists is missing (deleted, or an older list taken
// after damage to the MANIFEST cut it short): Open refuses with an error
// that names the MANIFEST and the table and says what to do.
func TestMissingTable(t *testing.T) {
	orig, _, _ := damagedStore(t, false)
	var table string
	for _, name := range dirNames(t, orig) {
		if strings.HasSuffix(name, ".sst") {
			table = name
		}
	}
	if table == "" {
		t.Fatal("the store has no table")
	}
	dir := copyDir(t, orig)
	if err := os.Remove(filepath.Join(dir, table)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir, Logger: discard})
	if err == nil {
		t.Fatal("opened a store missing a table")
	}
	msg := err.Error()
	for _, want := range []string{"MANIFEST-", strings.TrimSuffix(table, ".sst"), "move it aside"} {
		if !errors.Is(err, ErrStorage) || !strings.Contains(msg, want) {
			t.Fatalf("error %q does not wrap ErrStorage or say %q", msg, want)
		}
	}
	t.Log(strings.ReplaceAll(msg, dir, "DIR"))
}

// TestMalformedRecordLog: record log contents that the engine's checksums
// pass but that this store never writes (written here through the engine
// itself, as damage in memory before a write would leave them) make Open
// fail with an ErrStorage error that says the store is damaged and names the
// key, and never panic: a key in the log's range of the wrong length (Open
// reads the log's first and last keys) and an entry that does not parse
// (Open folds what the log holds). What the store held before stays loadable
// once the bad key is removed.
func TestMalformedRecordLog(t *testing.T) {
	good, err := appendEntry(nil, []store.PartitionRecords{{Partition: 2, Records: []store.Record{{Key: []byte("k"), Value: []byte("v")}}}})
	if err != nil {
		t.Fatal(err)
	}
	badEntry := append([]byte{2, byte(len(good) - 2)}, good[2:]...) // fine so far
	badEntry = append(badEntry[:len(badEntry)-2], 0x80)             // the value's length runs out
	short := append(slices.Clone(logPrefix), 1, 2, 3)
	for _, tc := range []struct {
		name       string
		key, value []byte
		want       string
	}{
		{"short key", short, good, fmt.Sprintf("%x", short)},
		{"long key", append(logKey(1<<40), 0), good, fmt.Sprintf("%x", append(logKey(1<<40), 0))},
		{"entry", logKey(1 << 40), badEntry, fmt.Sprintf("%x", logKey(1<<40))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(Options{Dir: dir, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Append(context.Background(), 2, []store.Record{{Key: []byte("kept"), Value: []byte("1")}}); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Set(tc.key, tc.value, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = Open(Options{Dir: dir, Logger: discard})
			if err == nil {
				t.Fatal("opened a store whose record log holds what it never writes")
			}
			msg := err.Error()
			if !errors.Is(err, ErrStorage) || !strings.Contains(msg, "is damaged") || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q does not wrap ErrStorage, say the store is damaged and name %s", msg, tc.want)
			}
			t.Log(strings.ReplaceAll(msg, dir, "DIR"))

			// Remove the bad key with the engine alone: the store opens
			// and what it held is there.
			db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: pebbleLogger{log: discard}})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Delete(tc.key, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(Options{Dir: dir, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []string
			if err := s.Load(context.Background(), 2, func(r store.Record) error {
				got = append(got, string(r.Key)+"="+string(r.Value))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, []string{"kept=1"}) {
				t.Fatalf("loaded %q, want [kept=1]", got)
			}
		})
	}
}
