module github.com/trawl-dev/trawl

go 1.26.8
