// Package discovery decides which tools an agent's model is given.
package discovery
