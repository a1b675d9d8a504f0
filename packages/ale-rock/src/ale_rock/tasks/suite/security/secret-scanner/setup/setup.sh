# git metadata is not shipped as package data, so create the history file here
mkdir -p repo/.git
echo 'AKIAABCDEFGHIJKLMNOP in git history' > repo/.git/packed
