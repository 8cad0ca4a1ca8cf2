package cache

import (
	"fmt"
	"sync"
	"testing"
)

func TestCapsOnEntriesAndCost(t *testing.T) {
	c := New[string, []byte](3, 0, nil)
	for i := range 10 {
		c.Put(fmt.Sprint(i), nil)
	}
	if c.Len() != 3 {
		t.Fatalf("%d entries, want the cap 3", c.Len())
	}
	b := New(100, 1000, func(_ string, v []byte) int64 { return int64(len(v)) })
	for i := range 50 {
		b.Put(fmt.Sprint(i), make([]byte, 300))
	}
	if b.Cost() > 1000 || b.Len() != 3 {
		t.Fatalf("cost %d over %d entries, want at most 1000", b.Cost(), b.Len())
	}
	if b.Put("huge", make([]byte, 1001)) {
		t.Error("an entry over the whole budget was stored")
	}
	b.Put("x", make([]byte, 10))
	b.Put("x", make([]byte, 20))
	if v, _ := b.Get("x"); len(v) != 20 {
		t.Error("replacing a key kept the old value")
	}
	if b.Cost() > 1000 {
		t.Errorf("cost %d after replacing", b.Cost())
	}
}

func TestRecentlyUsedSurvive(t *testing.T) {
	c := New[int, int](4, 0, nil)
	for i := range 4 {
		c.Put(i, i)
	}
	// 0 is read before every insert; CLOCK keeps it while the rest cycle.
	for i := 4; i < 40; i++ {
		c.Get(0)
		c.Put(i, i)
	}
	if _, ok := c.Get(0); !ok {
		t.Error("an entry read between every insert was evicted")
	}
	if c.Len() != 4 {
		t.Errorf("%d entries", c.Len())
	}
}

func TestDelete(t *testing.T) {
	c := New[int, int](10, 0, nil)
	for i := range 10 {
		c.Put(i, i)
	}
	c.Delete(3)
	c.DeleteFunc(func(k, _ int) bool { return k%2 == 0 })
	for i := range 10 {
		_, ok := c.Get(i)
		if want := i%2 == 1 && i != 3; ok != want {
			t.Errorf("%d present %v, want %v", i, ok, want)
		}
	}
	if c.Len() != 4 || c.Cost() != 4 {
		t.Errorf("len %d cost %d", c.Len(), c.Cost())
	}
}

func TestConcurrentUse(t *testing.T) {
	c := New(64, 1<<20, func(_ int, v []byte) int64 { return int64(len(v)) })
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := (g*7919 + i) % 500
				if _, ok := c.Get(k); !ok {
					c.Put(k, make([]byte, 100))
				}
				if i%97 == 0 {
					c.Delete(k)
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() > 64 || c.Cost() > 1<<20 || c.Cost() != int64(c.Len()*100) {
		t.Errorf("len %d cost %d", c.Len(), c.Cost())
	}
}

func BenchmarkGetParallel(b *testing.B) {
	c := New[string, int](1024, 0, nil)
	for i := range 1024 {
		c.Put(fmt.Sprint(i), i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Get(fmt.Sprint(i & 1023))
			i++
		}
	})
}
